/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import "runtime/debug"

// HostGCPercent and HostMemoryLimit are the garbage collector settings of a process that hosts a sandbox
// (TuneHost).
const (
	HostGCPercent   = 200
	HostMemoryLimit = 16 << 30
)

// TuneHost trades memory for CPU in a process that hosts a sandbox, for the process's owner to call (the sandbox
// command, a benchmark's TestMain): the API server, etcd, the controllers and the simulated kubelets in one process
// allocate for every request and watch event, and with the default settings the collector took a quarter of the
// process's CPU in a scale-out of a thousand pods. The heap may grow by HostGCPercent between collections, and
// collections come sooner as it nears HostMemoryLimit.
func TuneHost() {
	debug.SetGCPercent(HostGCPercent)
	debug.SetMemoryLimit(HostMemoryLimit)
}
