/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package schedulerapp

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/component-base/configz"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/stevedore-dev/stevedore/pkg/componentglobals"
)

// Instance is a scheduler running inside this process.
type Instance struct {
	cancel  context.CancelFunc
	stopped chan struct{}
	err     error
}

// Start runs the scheduler inside this process with the given command-line arguments (as the binary takes
// them) until Stop. It gives the scheduler its own component-globals registry, so that it can share the process
// with an in-process kube-apiserver and controller manager. Only one scheduler may run in a process at a time.
// Leader election must be off (--leader-elect=false): the scheduler exits the process when it stops leading.
func Start(ctx context.Context, args []string, deps Deps) (*Instance, error) {
	opts := scheduleroptions.NewOptions()
	reg, _, err := componentglobals.New()
	if err != nil {
		return nil, err
	}
	opts.ComponentGlobalsRegistry = reg
	fs := pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("scheduler flags: %w", err)
	}
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	run, err := setup(ctx, opts, fs, deps)
	if err != nil {
		cancel()
		return nil, err
	}
	i := &Instance{cancel: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(i.stopped)
		i.err = run()
	}()
	return i, nil
}

// Stop stops the scheduler and waits for it. It returns the error the scheduler stopped with, if it was not
// the expected end of a run without leader election.
func (i *Instance) Stop() error {
	i.cancel()
	<-i.stopped
	configz.Delete("componentconfig")
	if i.err != nil && !errors.Is(i.err, context.Canceled) && i.err.Error() != "finished without leader elect" {
		return i.err
	}
	return nil
}
