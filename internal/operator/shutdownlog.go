/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package operator

import (
	"context"

	"github.com/go-logr/logr"
)

// The record controller-runtime v0.24 logs at error level on every graceful
// shutdown of a leader-elected manager: after its runnables stop it cancels
// leader election, the elector releases the lease and reports "leader
// election lost", and the stop sequence logs that as unexpected
// (kubernetes-sigs/controller-runtime#3535). Upgrades and drains stop pods
// all the time; an error line each time would train operators to ignore
// error lines.
const (
	stopSequenceMsg    = "error received after stop sequence was engaged"
	leaderElectionLost = "leader election lost"
	releasedOnShutdown = "Released the leader election lease on shutdown"
)

// shutdownSink logs that one record at info level, and only once stopping
// is done: the process was asked to stop. A lease lost while running still
// ends the manager with an error.
type shutdownSink struct {
	logr.LogSink
	stopping context.Context
}

// quietLeaseRelease wraps log so that the expected lease release on
// shutdown is not an error-level line.
func quietLeaseRelease(stopping context.Context, log logr.Logger) logr.Logger {
	if log.GetSink() == nil {
		return log
	}
	return logr.New(shutdownSink{LogSink: log.GetSink(), stopping: stopping})
}

func (s shutdownSink) Error(err error, msg string, kv ...any) {
	if s.stopping.Err() != nil && msg == stopSequenceMsg && err != nil && err.Error() == leaderElectionLost {
		if s.Enabled(0) {
			s.LogSink.Info(0, releasedOnShutdown, kv...)
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s shutdownSink) WithValues(kv ...any) logr.LogSink {
	return shutdownSink{LogSink: s.LogSink.WithValues(kv...), stopping: s.stopping}
}

func (s shutdownSink) WithName(name string) logr.LogSink {
	return shutdownSink{LogSink: s.LogSink.WithName(name), stopping: s.stopping}
}

// WithCallDepth keeps the caller shown in log lines that of the code that
// logged, not this wrapper.
func (s shutdownSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return shutdownSink{LogSink: cd.WithCallDepth(depth), stopping: s.stopping}
	}
	return s
}
