module pprofagent/test/go_cgo

go 1.26.0
