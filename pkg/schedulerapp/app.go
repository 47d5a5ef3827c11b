/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package schedulerapp runs kube-scheduler with Stevedore's plugins registered, either as the binary's root
// command or inside another process (the sandbox). It uses the scheduler's own option parsing, Setup and Run, so
// every kube-scheduler flag and KubeSchedulerConfiguration field works as upstream.
package schedulerapp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/yaml"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/client"
	"github.com/stevedore-dev/stevedore/pkg/plugins/coscheduling"
	"github.com/stevedore-dev/stevedore/pkg/plugins/provisioner"
	"github.com/stevedore-dev/stevedore/pkg/state"
)

// Deps are what the hosting process hands to the plugins.
type Deps struct {
	// Env looks up environment variables; default os.Getenv.
	Env func(string) string
}

func (d Deps) env() func(string) string {
	if d.Env == nil {
		return os.Getenv
	}
	return d.Env
}

// NewCommand returns the scheduler command: kube-scheduler with Stevedore's plugins, all of its flags, and
// --kubeconfig honoured even when --config is given (upstream ignores it then; operators expect the flag to win).
func NewCommand(deps Deps) *cobra.Command {
	opts := scheduleroptions.NewOptions()
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Stevedore: kube-scheduler that launches EC2 nodes for the pods no node fits",
		Long: `Stevedore is kube-scheduler with the Provisioner plugin registered. Pods with
spec.schedulerName: stevedore are scheduled by it; when no node fits, the plugin packs the waiting
pods onto the cheapest EC2 instances allowed by your NodePools, launches them and nominates each pod
to its node. Run with --config pointing at a KubeSchedulerConfiguration (see config/scheduler-config.yaml).`,
		SilenceUsage: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Name() != "scheduler" {
				return nil
			}
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			verflag.PrintAndExitIfRequested()
			fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
			if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-setupSignalContext().Done()
				cancel()
			}()
			if mg, ok := fg.(featuregate.MutableFeatureGate); ok {
				mg.AddMetrics()
			}
			return Run(ctx, opts, cmd.Flags(), deps)
		},
		Args: cobra.NoArgs,
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	// The scheduler's sectioned flag help serves the root command; subcommands keep cobra's own help.
	schedulerHelp, schedulerUsage := cmd.HelpFunc(), cmd.UsageFunc()
	plain := &cobra.Command{}
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		if c != cmd {
			plain.HelpFunc()(c, args)
			return
		}
		schedulerHelp(c, args)
		printSubcommands(c)
	})
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		if c != cmd {
			return plain.UsageFunc()(c)
		}
		return schedulerUsage(c)
	})
	return cmd
}

func printSubcommands(c *cobra.Command) {
	out := c.OutOrStdout()
	fmt.Fprintf(out, "\nCommands (run without one to start the scheduler):\n")
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			fmt.Fprintf(out, "  %-10s %s\n", sub.Name(), sub.Short)
		}
	}
	fmt.Fprintf(out, "Use \"%s <command> --help\" for a command's flags.\n", c.CommandPath())
}

// Run sets the scheduler up from parsed options and runs it until ctx ends or it loses its lease.
func Run(ctx context.Context, opts *scheduleroptions.Options, flags *pflag.FlagSet, deps Deps) error {
	run, err := setup(ctx, opts, flags, deps)
	if err != nil {
		return err
	}
	return run()
}

// setup does everything that can fail before the scheduler runs, and returns the function that runs it.
func setup(ctx context.Context, opts *scheduleroptions.Options, flags *pflag.FlagSet, deps Deps) (func() error, error) {
	cleanup, err := rewriteConfigFile(opts, flags, deps.env())
	if err != nil {
		return nil, err
	}
	kubeconfig, stevedore, err := readConfigFile(ctx, opts, deps.env())
	if err != nil {
		cleanup()
		return nil, err
	}
	if err := fitGatesToServer(ctx, utilfeature.DefaultMutableFeatureGate, opts.Master, kubeconfig, stevedore); err != nil {
		cleanup()
		return nil, err
	}
	turned, err := setDefaultGates(utilfeature.DefaultMutableFeatureGate, flags)
	if err != nil {
		cleanup()
		return nil, err
	}
	for _, g := range turned {
		klog.FromContext(ctx).Info("Feature turned on by Stevedore's default; --feature-gates can turn it off", "featureGate", g)
	}
	leadership, shared := state.NewLeadership(), &client.Shared{}
	factory, queueSort := provisioner.NewFactories(provisioner.Options{Env: deps.env(), Build: buildBackend(leadership, shared, deps.env())})
	cc, sched, err := schedapp.Setup(ctx, opts, schedapp.WithPlugin(provisioner.Name, factory),
		schedapp.WithPlugin(provisioner.QueueSortName, queueSort), schedapp.WithPlugin(coscheduling.Name, coscheduling.NewFactory(shared)))
	cleanup()
	if err != nil {
		return nil, err
	}
	if cc.LeaderElection == nil {
		leadership.Lead()
	} else {
		cc.LeaderElection.Lock = &observedLock{Interface: cc.LeaderElection.Lock, leadership: leadership}
	}
	klog.FromContext(ctx).Info("Starting Stevedore scheduler", "leaderElection", cc.LeaderElection != nil)
	return func() error { return schedapp.Run(ctx, cc, sched) }, nil
}

// readConfigFile checks the plugin arguments of every profile of the --config file, before anything talks to the
// API server (a malformed argument stops the start naming it, whether the API server answers or not), and returns
// the kubeconfig the scheduler will connect with: clientConnection.kubeconfig of the file, else --kubeconfig;
// empty means in-cluster. stevedore says whether a profile runs Stevedore's plugin (and needs its CRDs).
func readConfigFile(ctx context.Context, opts *scheduleroptions.Options, env func(string) string) (kubeconfig string, stevedore bool, err error) {
	if opts.ConfigFile == "" {
		switch {
		case opts.Deprecated != nil && opts.Deprecated.Kubeconfig != "":
			return opts.Deprecated.Kubeconfig, false, nil
		case opts.ComponentConfig != nil:
			return opts.ComponentConfig.ClientConnection.Kubeconfig, false, nil
		}
		return "", false, nil
	}
	cfg, err := scheduleroptions.LoadConfigFromFile(klog.FromContext(ctx), opts.ConfigFile)
	if err != nil {
		return "", false, err
	}
	for _, profile := range cfg.Profiles {
		stevedore = stevedore || runsPlugin(profile, config.PluginName)
		for _, pc := range profile.PluginConfig {
			if pc.Name != config.PluginName {
				continue
			}
			if _, err := config.Decode(pc.Args, env); err != nil {
				return "", false, fmt.Errorf("profile %q: %w", profile.SchedulerName, err)
			}
		}
	}
	return cfg.ClientConnection.Kubeconfig, stevedore, nil
}

// runsPlugin reports whether a profile enables the plugin at an extension point or configures it.
func runsPlugin(profile schedconfig.KubeSchedulerProfile, name string) bool {
	for _, pc := range profile.PluginConfig {
		if pc.Name == name {
			return true
		}
	}
	if profile.Plugins == nil {
		return false
	}
	p := profile.Plugins
	for _, set := range []schedconfig.PluginSet{p.PreEnqueue, p.QueueSort, p.PreFilter, p.Filter, p.PostFilter, p.PreScore,
		p.Score, p.Reserve, p.Permit, p.PreBind, p.Bind, p.PostBind, p.MultiPoint} {
		for _, plugin := range set.Enabled {
			if plugin.Name == name {
				return true
			}
		}
	}
	return false
}

// rewriteConfigFile runs the scheduler on a copy of the --config file with what the file leaves to the process:
// --kubeconfig wins over clientConnection.kubeconfig (upstream kube-scheduler ignores the flag with --config), and
// a leader election without resourceNamespace takes the lease in $STEVEDORE_NAMESPACE (the pod's own namespace, set
// by the Deployment) rather than kube-system, so that an install moved to another namespace keeps working.
func rewriteConfigFile(opts *scheduleroptions.Options, flags *pflag.FlagSet, env func(string) string) (func(), error) {
	noop := func() {}
	if opts.ConfigFile == "" {
		return noop, nil
	}
	raw, err := os.ReadFile(opts.ConfigFile)
	if err != nil {
		return noop, fmt.Errorf("reading --config: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return noop, fmt.Errorf("parsing --config %s: %w", opts.ConfigFile, err)
	}
	changed, err := overrideKubeconfig(doc, flags)
	if err != nil {
		return noop, err
	}
	if !defaultLeaseNamespace(doc, env(config.EnvNamespace)) && !changed {
		return noop, nil
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return noop, err
	}
	dir, err := os.MkdirTemp("", "stevedore-scheduler-config")
	if err != nil {
		return noop, err
	}
	path := filepath.Join(dir, filepath.Base(opts.ConfigFile))
	if err := os.WriteFile(path, out, 0o600); err != nil {
		_ = os.RemoveAll(dir) // best effort: the write's error is the one to report
		return noop, err
	}
	opts.ConfigFile = path
	return func() {
		if err := os.RemoveAll(dir); err != nil {
			klog.ErrorS(err, "Removing the copy of --config", "dir", dir)
		}
	}, nil
}

// overrideKubeconfig sets clientConnection.kubeconfig of a decoded configuration to --kubeconfig when the flag
// was given, and reports whether it did.
func overrideKubeconfig(doc map[string]any, flags *pflag.FlagSet) (bool, error) {
	f := flags.Lookup("kubeconfig")
	if f == nil || !f.Changed {
		return false, nil
	}
	cc, _ := doc["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	kubeconfig, err := filepath.Abs(f.Value.String())
	if err != nil {
		return false, err
	}
	cc["kubeconfig"] = kubeconfig
	doc["clientConnection"] = cc
	return true, nil
}

// defaultLeaseNamespace sets leaderElection.resourceNamespace of a decoded configuration to namespace when the
// configuration leaves it unset, and reports whether it did.
func defaultLeaseNamespace(doc map[string]any, namespace string) bool {
	le, ok := doc["leaderElection"].(map[string]any)
	if namespace == "" || !ok || le["resourceNamespace"] != nil {
		return false
	}
	le["resourceNamespace"] = namespace
	return true
}

// observedLock is the scheduler's own leader-election lock, watched: the first time this process writes the
// lease as its holder, it leads, and the background loops may start. Losing the lease ends the process (the
// scheduler exits), so leadership never has to be taken back.
type observedLock struct {
	resourcelock.Interface
	leadership *state.Leadership
}

func (l *observedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	l.observe(ler, err)
	return err
}

func (l *observedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	l.observe(ler, err)
	return err
}

func (l *observedLock) observe(ler resourcelock.LeaderElectionRecord, err error) {
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.leadership.Lead()
	}
}
