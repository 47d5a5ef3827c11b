//go:build nosandbox

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newSandboxCommand stands in for `scheduler sandbox` in a build without it: the image's binary is built with
// -tags nosandbox, which leaves etcd, kube-apiserver, the controllers, kwok and the AWS emulator out of it.
func newSandboxCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "sandbox",
		Short:              "Not in this build (the image's binary leaves the sandbox out; make build has it)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("this build of the scheduler has no sandbox (it was built with -tags nosandbox, as the image is); `make build` builds one that has it")
		},
	}
}
