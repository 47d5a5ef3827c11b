//go:build !nosandbox

/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

func newSandboxCommand() *cobra.Command {
	opts := sandbox.Options{WithScheduler: true, LaunchDelay: 2 * time.Second}
	logOptions := logs.NewOptions()
	var scenario, logFile, catalogFile string
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Run a local cluster with a simulated AWS and the Stevedore scheduler",
		Long: `Runs, in this one process: etcd, kube-apiserver, the kube-controller-manager controllers, simulated
kubelets (kwok), two bootstrap nodes tainted CriticalAddonsOnly, an EC2/SQS emulator and (unless
--with-scheduler=false) the Stevedore scheduler configured as in production. It never talks to real AWS.
Prints a line containing "sandbox ready" on stdout once everything is up; stops on SIGINT or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if logFile != "" {
				f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // G304: the path is the user's own --log-file argument
				if err != nil {
					return err
				}
				defer f.Close()
				// The components log through klog and slog to os.Stderr; the command's own errors still go to
				// the terminal.
				cmd.SetErr(os.Stderr)
				os.Stderr = f
			}
			if err := logsapi.ValidateAndApply(logOptions, nil); err != nil {
				return err
			}
			sandbox.TuneHost()
			if catalogFile != "" {
				cat, err := catalog.ReadFile(catalogFile)
				if err != nil {
					return fmt.Errorf("--catalog: %w", err)
				}
				opts.Catalog, opts.Region = cat, cat.Region
			}
			ctx, cancel := signalNotifyContext(context.Background())
			defer cancel()
			sb, err := sandbox.Start(ctx, opts)
			if err != nil {
				return err
			}
			defer sb.Stop()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "sandbox ready in %.1fs: apiserver %s, kubeconfig %s\n", sb.StartupTime.Seconds(), sb.RESTConfig.Host,
				firstNonEmpty(opts.KubeconfigOut, sb.Kubeconfig()))
			if opts.EnvOut != "" {
				fmt.Fprintf(out, "environment for a scheduler run outside the sandbox: source %s\n", opts.EnvOut)
			}
			if scenario != "" {
				return sandbox.RunScenario(ctx, sb, scenario, out)
			}
			<-ctx.Done()
			fmt.Fprintln(out, "sandbox stopping")
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.KubeconfigOut, "kubeconfig-out", "", "write an admin kubeconfig for kubectl to this path")
	fs.StringVar(&opts.EnvOut, "env-out", "", "write shell export lines (AWS endpoints, region, dummy credentials, STEVEDORE_CLUSTER_NAME, STEVEDORE_INTERRUPTION_QUEUE_URL) to this path")
	fs.BoolVar(&opts.WithScheduler, "with-scheduler", opts.WithScheduler, "run the Stevedore scheduler inside the sandbox; false to run the real binary against it")
	fs.DurationVar(&opts.LaunchDelay, "launch-delay", opts.LaunchDelay, "time from an emulated instance's launch to its Node registering")
	fs.StringVar(&opts.ClusterName, "cluster-name", "my-cluster", "name of the simulated EKS cluster (the examples in manifests/examples discover subnets by it)")
	fs.StringVar(&opts.Dir, "dir", "", "directory for the sandbox's files (default: a temporary directory removed on exit)")
	fs.StringVar(&scenario, "scenario", "", "run a scripted scenario, print its story and exit 0 on success, 1 on failure: "+sandbox.ScenarioNames())
	fs.StringVar(&opts.Region, "region", "us-east-1", "region (and so partition, ARNs and currency) of the emulated AWS, seeded with the region's embedded catalog")
	fs.StringVar(&catalogFile, "catalog", "", "instance-type catalog seeding the emulated EC2, in the format of `plan --catalog` (default: the region's embedded catalog); its region becomes the sandbox's")
	fs.StringVar(&logFile, "log-file", "", "write the components' logs to this file instead of stderr")
	fs.StringVar(&opts.KubeBinaries, "kube-binaries", "", "folder with kube-apiserver and kube-controller-manager of another supported Kubernetes minor to run the control plane from (make kube-binaries builds them under bin/kube/<minor>); default: the minor Stevedore is built on, in process")
	fs.DurationVar(&opts.SpotNotice, "spot-notice", awsemu.DefaultSpotNotice, "time from a spot interruption warning to the emulated instance's termination")
	logsapi.AddFlags(logOptions, fs)
	cmd.AddCommand(newSandboxInterruptCommand())
	return cmd
}

// newSandboxInterruptCommand sends an interruption notice to a running sandbox, found through its --env-out file.
func newSandboxInterruptCommand() *cobra.Command {
	var envFile, node, instance, kind string
	var notice time.Duration
	cmd := &cobra.Command{
		Use:   "interrupt",
		Short: "Send an interruption notice for a node of a running sandbox",
		Long: `Sends to the sandbox's interruption queue the EventBridge event AWS sends before it takes an instance away,
and has the emulated EC2 act as AWS then does: spot (interruption warning; the instance is terminated after
--notice, default the sandbox's --spot-notice), rebalance (rebalance recommendation), stop (state change to
stopping), scheduled (AWS Health scheduled change). The sandbox is found through the file it wrote with --env-out.`,
		Example: `  scheduler sandbox --env-out /tmp/stevedore.env &
  scheduler sandbox interrupt --env-file /tmp/stevedore.env --node ip-10-0-16-12.ec2.internal --kind spot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := readEnvFile(envFile)
			if err != nil {
				return err
			}
			endpoint, queue := env["AWS_ENDPOINT_URL_EC2"], env[config.EnvInterruptionQueue]
			if endpoint == "" || queue == "" {
				return fmt.Errorf("--env-file %s lacks AWS_ENDPOINT_URL_EC2 or %s", envFile, config.EnvInterruptionQueue)
			}
			form := url.Values{"queue": {queue}, "kind": {kind}, "node": {node}, "instance": {instance}}
			if notice != 0 {
				form.Set("notice", notice.String())
			}
			resp, err := http.PostForm(strings.TrimSuffix(endpoint, "/")+"/_emulator/notify", form)
			if err != nil {
				return fmt.Errorf("reaching the sandbox's emulator at %s: %w", endpoint, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the emulator refused: %s", strings.TrimSpace(string(body)))
			}
			fmt.Fprint(cmd.OutOrStdout(), string(body))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&envFile, "env-file", "", "the file the sandbox wrote with --env-out (required)")
	fs.StringVar(&node, "node", "", "name of the node whose instance is interrupted")
	fs.StringVar(&instance, "instance", "", "instance id (instead of --node)")
	fs.StringVar(&kind, "kind", awsemu.NoticeSpot, "notice kind: "+strings.Join(awsemu.NoticeKinds, ", "))
	fs.DurationVar(&notice, "notice", 0, "spot only: time until the instance is terminated (default: the sandbox's --spot-notice)")
	_ = cmd.MarkFlagRequired("env-file")
	cmd.MarkFlagsOneRequired("node", "instance")
	return cmd
}

// readEnvFile reads the "export KEY=VALUE" lines of a sandbox's --env-out file.
func readEnvFile(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: the path is the user's own --env-file argument
	if err != nil {
		return nil, fmt.Errorf("--env-file: %w", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "export "))
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, "'")
		}
		out[k] = v
	}
	return out, nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
