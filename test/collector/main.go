// A Collector for the tests: the core OTLP receiver and one exporter,
// "record", that appends every batch of profiles it receives to a file as
// one line of OTLP JSON (pdata's own marshaler), so that a test reads
// exactly what the receiver decoded. Built by `make test` from the
// modules pinned in go.mod; nothing here is shipped.
package main

import (
	"context"
	"errors"
	"os"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/xexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

type recordConfig struct {
	Path string `mapstructure:"path"`
}

type recorder struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (r *recorder) Start(context.Context, component.Host) error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	r.f = f
	return err
}

func (r *recorder) Shutdown(context.Context) error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}

func (r *recorder) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{}
}

func (r *recorder) ConsumeProfiles(_ context.Context, p pprofile.Profiles) error {
	b, err := (&pprofile.JSONMarshaler{}).MarshalProfiles(p)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err = r.f.Write(append(b, '\n'))
	return err
}

func recordFactory() exporter.Factory {
	return xexporter.NewFactory(component.MustNewType("record"),
		func() component.Config { return &recordConfig{} },
		xexporter.WithProfiles(func(_ context.Context, _ exporter.Settings,
			cfg component.Config) (xexporter.Profiles, error) {
			c := cfg.(*recordConfig)
			if c.Path == "" {
				return nil, errors.New("record: path is required")
			}
			return &recorder{path: c.Path}, nil
		}, component.StabilityLevelDevelopment))
}

func factories() (otelcol.Factories, error) {
	rec, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exp, err := otelcol.MakeFactoryMap[exporter.Factory](recordFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: rec,
		Exporters: exp,
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "test-collector",
			Description: "Collector for pprofagent's tests", Version: "0.165.0"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		os.Exit(1)
	}
}
