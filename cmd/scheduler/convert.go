/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stevedore-dev/stevedore/pkg/karpenter"
	"github.com/stevedore-dev/stevedore/pkg/manifest"
)

func newConvertCommand() *cobra.Command {
	var files []string
	var outFile string
	var dropUnsupported bool
	cmd := &cobra.Command{
		Use:   "convert -f karpenter.yaml [-o stevedore.yaml] [--drop-unsupported]",
		Short: "Write Stevedore's NodePools, EC2NodeClasses and NodeOverlays for Karpenter's",
		Long: `convert reads Karpenter's karpenter.sh/v1 NodePools, karpenter.k8s.aws/v1 EC2NodeClasses and karpenter.sh/v1alpha1
NodeOverlays (files, or kubectl get nodepools.karpenter.sh,ec2nodeclasses.karpenter.k8s.aws -o yaml) and writes
Stevedore's: the same names and specs under stevedore.dev/v1, node class references in Stevedore's group,
without status. Karpenter's NodeClaims in the input are skipped (Stevedore creates its own). What Stevedore
refuses or does not read (docs/migration-from-karpenter.md) is an error naming the object and the field, unless
--drop-unsupported: then the manifests are written without it and each thing left out is listed on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("give Karpenter's objects with -f")
			}
			dec := manifest.NewDecoder()
			var objs []runtime.Object
			for _, f := range files {
				o, err := dec.DecodeFile(f)
				if err != nil {
					return err
				}
				objs = append(objs, o...)
			}
			conv, err := karpenter.Convert(objs, dec.Ignored(), dropUnsupported)
			if err != nil {
				return err
			}
			out, err := karpenter.WriteYAML(conv.Objects)
			if err != nil {
				return err
			}
			for _, l := range conv.Left {
				fmt.Fprintln(cmd.ErrOrStderr(), "left out:", l)
			}
			for _, n := range conv.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
			}
			if outFile == "" || outFile == "-" {
				_, err = cmd.OutOrStdout().Write(out)
				return err
			}
			return os.WriteFile(outFile, out, 0o600)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML or JSON file of Karpenter's NodePools, EC2NodeClasses and NodeOverlays (repeatable)")
	cmd.Flags().StringVarP(&outFile, "output", "o", "", "file to write the Stevedore manifests to (default stdout)")
	cmd.Flags().BoolVar(&dropUnsupported, "drop-unsupported", false, "write the manifests without what Stevedore refuses or does not read, listing it on stderr")
	return cmd
}
