/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// flakyProxy forwards TCP connections to the API server (TLS passes through untouched) and can cut every
// connection it carries (each watch of the scheduler restarts) or refuse connections for a while (the API server
// unavailable).
type flakyProxy struct {
	ln       net.Listener
	upstream string

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	downUntil time.Time
}

func newFlakyProxy(t *testing.T, upstream string) *flakyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *flakyProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := time.Now().Before(p.downUntil)
		p.mu.Unlock()
		if down {
			_ = client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client, server)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

func (p *flakyProxy) track(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
}

func (p *flakyProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection the proxy carries.
func (p *flakyProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// down refuses connections for d and cuts the ones open.
func (p *flakyProxy) down(d time.Duration) {
	p.mu.Lock()
	p.downUntil = time.Now().Add(d)
	p.mu.Unlock()
	p.cut()
}

// proxiedKubeconfig starts a proxy to the API server of kubeconfig and writes a copy of kubeconfig that goes
// through it.
func proxiedKubeconfig(t *testing.T, kubeconfig, dir string) (string, *flakyProxy) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var proxy *flakyProxy
	for _, cluster := range cfg.Clusters {
		proxy = newFlakyProxy(t, strings.TrimPrefix(cluster.Server, "https://"))
		cluster.Server = "https://" + proxy.ln.Addr().String()
	}
	path := filepath.Join(dir, "proxied-kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path, proxy
}

// TestAPIServerFaultsCauseNoDuplicateAndNoCrash runs the scheduler binary through a proxy that cuts its
// connections every 1.5 seconds (every watch restarts), takes the API server away for five seconds, while another
// client keeps writing the NodeClaims and nodes Stevedore updates (its updates conflict), through a scale-up and a
// consolidating scale-down. The process must stay up and the cluster settle with no duplicate launch and no leaked
// instance. Its logs and the cluster's events must not carry the AWS secret key or the node class's user data.
func TestAPIServerFaultsCauseNoDuplicateAndNoCrash(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	dir := t.TempDir()
	sandbox, kubeconfig, envFile := startSandbox(t, scheduler, dir, "--launch-delay", "1s")
	c := connect(t, kubeconfig, envFile)
	proxied, proxy := proxiedKubeconfig(t, kubeconfig, dir)
	config := schedulerConfig(t, dir, "apifaults.yaml", func(_, args map[string]any) {
		args["disruptionPollInterval"], args["disruptionValidationDelay"], args["garbageCollectionInterval"] = "1s", "1s", "2s"
	})
	// user data that must never be logged: it may carry secrets in real clusters
	const userDataMarker = "stevedore-test-userdata-7f3a9c"
	nc := harness.NewNodeClass()
	userData := "#!/bin/bash\necho " + userDataMarker + "\n"
	nc.Spec.UserData = &userData
	if _, err := c.stevedore.StevedoreV1().EC2NodeClasses().Create(context.Background(), nc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := c.isolatedWorkload(t, "apifaults", "500m", func(np *stevedorev1.NodePool) {
		after := 5 * time.Second
		np.Spec.Disruption.ConsolidateAfter = &stevedorev1.NillableDuration{Duration: &after}
	})

	var logMu sync.Mutex
	var logs []string
	var leading atomic.Bool
	sched := start(t, c.env, func(line string) {
		logMu.Lock()
		logs = append(logs, line)
		logMu.Unlock()
		if strings.Contains(line, leadLine) {
			leading.Store(true)
		}
	}, scheduler, "--config", config, "--kubeconfig", proxied, "--secure-port=0", "-v=4")
	ctx := context.Background()
	if why := waitFor(ctx, 2*time.Minute, func(context.Context) string {
		if !leading.Load() {
			return "the scheduler does not lead"
		}
		return ""
	}); why != "" {
		t.Fatal(why)
	}

	// chaos: a writer bumping the NodeClaims and nodes, connection cuts, one outage
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var writes, cuts atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; chaosCtx.Err() == nil; i++ {
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.stevedore.dev/chaos":"%d"}}}`, i))
			claims, err := c.stevedore.StevedoreV1().NodeClaims().List(chaosCtx, metav1.ListOptions{})
			if err == nil {
				for _, cl := range claims.Items {
					if _, err := c.stevedore.StevedoreV1().NodeClaims().Patch(chaosCtx, cl.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
						writes.Add(1)
					}
					if cl.Status.NodeName != "" {
						if _, err := c.kube.CoreV1().Nodes().Patch(chaosCtx, cl.Status.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
							writes.Add(1)
						}
					}
				}
			}
			time.Sleep(100 * time.Millisecond) // the writer's pace, not synchronisation
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; chaosCtx.Err() == nil; i++ {
			time.Sleep(1500 * time.Millisecond) // the fault schedule, not synchronisation
			if i == 4 {
				proxy.down(5 * time.Second)
			} else {
				proxy.cut()
			}
			cuts.Add(1)
		}
	}()

	phases := []struct {
		replicas int32
		up       bool
	}{{14, true}, {4, false}}
	var last *snapshot
	for _, ph := range phases {
		c.scale(t, ns, ph.replicas)
		var idleAtBind []string
		if ph.up {
			idleAtBind = c.idleWhenBound(ctx, ns, "apifaults", int(ph.replicas))
		}
		var why string
		last, why = c.settle(ctx, ns, "apifaults", int(ph.replicas))
		if why != "" {
			t.Errorf("%d replicas: not settled under API faults within 4 minutes: %s", ph.replicas, why)
		}
		if len(idleAtBind) > 0 {
			t.Errorf("%d replicas: NodeClaims hosting none of the pods when the last one bound (duplicate launch): %v", ph.replicas, idleAtBind)
		}
	}
	stopChaos()
	wg.Wait()
	if d := last.duplicates(); len(d) > 0 {
		t.Errorf("NodeClaims with more than one instance: %v", d)
	}
	select {
	case err := <-sched.waited:
		t.Fatalf("the scheduler exited under API faults: %v", err)
	default:
	}
	t.Logf("under %d connection cuts (one a 5s outage) and %d conflicting writes: settled twice, %d instances launched, %d leaked, no duplicate",
		cuts.Load(), writes.Load(), len(last.instances), len(last.leaked()))

	// nothing secret in the logs or events
	secret := ""
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "AWS_SECRET_ACCESS_KEY="); ok {
			secret = v
		}
	}
	logMu.Lock()
	for _, line := range logs {
		if strings.Contains(line, userDataMarker) || (secret != "" && strings.Contains(line, secret)) {
			t.Errorf("a scheduler log line carries the user data or the AWS secret key: %s", line)
		}
	}
	t.Logf("%d scheduler log lines at -v=4 checked for the secret key and the user data", len(logs))
	logMu.Unlock()
	events, err := c.kube.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Note, userDataMarker) || (secret != "" && strings.Contains(ev.Note, secret)) {
			t.Errorf("event %s/%s carries the user data or the AWS secret key: %s", ev.Namespace, ev.Name, ev.Note)
		}
	}
	if err := sched.stop(t); err != nil {
		t.Logf("scheduler exited with %v after SIGTERM", err)
	}
	if err := sandbox.stop(t); err != nil {
		t.Logf("sandbox exited with %v after SIGTERM", err)
	}
}
