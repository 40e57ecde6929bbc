# The agent exports only interposed C-library names and the public API:
# nothing of civetweb, libunwind, zlib, libiberty or its own internals.
. "$TOP/test/integration/lib.sh"

allowed='^(pprof_[a-z0-9_]+|malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|malloc_usable_size|setgroups|initgroups|unshare|setns|prctl|chroot|setrlimit|setrlimit64|prlimit|prlimit64|capset|daemon|pthread_create|pthread_exit|pthread_mutex_lock|pthread_mutex_trylock|pthread_mutex_timedlock|pthread_mutex_unlock|pthread_rwlock_rdlock|pthread_rwlock_wrlock|pthread_rwlock_timedrdlock|pthread_rwlock_timedwrlock|pthread_rwlock_unlock|pthread_cond_wait|pthread_cond_timedwait|sem_wait|sem_timedwait|dlopen|dlclose|dl_iterate_phdr|fork|sigaction|signal|sigprocmask|pthread_sigmask|sigwait|sigwaitinfo|sigtimedwait|setitimer|timer_create|exit|_exit|_Exit|execve|execv|execvp|setuid|setgid|seteuid|setegid|setreuid|setregid|setresuid|setresgid|sem_clockwait|pthread_mutex_clocklock|pthread_rwlock_clockrdlock|pthread_rwlock_clockwrlock|pthread_cond_clockwait|pthread_barrier_wait|pthread_join|pthread_timedjoin_np|pthread_clockjoin_np|pthread_spin_lock|syscall|close|close_range|closefrom|dup2|dup3|pipe2|socket|accept|accept4|recv|send|shutdown|read|write|readv|writev|pread|pwrite|pread64|pwrite64|recvfrom|sendto|recvmsg|sendmsg|connect|poll|ppoll|select|pselect|epoll_wait|epoll_pwait|nanosleep|clock_nanosleep|sleep|usleep|fsync|fdatasync|wait|waitpid|wait3|wait4|waitid|pthread_setname_np)(@.*)?$'
nm -D --defined-only "$AGENT" | awk '{print $3}' > "$WORK/exports"
cat "$WORK/exports"
bad=$(grep -Ev "$allowed" "$WORK/exports" || true)
[ -z "$bad" ] || fail "unexpected exported symbols: $bad"
grep -qx pthread_create "$WORK/exports" || fail "pthread_create is not interposed"
# The version node is anonymous: a named one would stop interposition.
if readelf -V "$AGENT" | grep -q 'Version definition'; then
    fail "the agent defines a named symbol version"
fi
echo ok
