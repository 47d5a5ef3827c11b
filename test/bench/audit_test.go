/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// auditPolicy logs every write the API server serves, once (when its response is complete), with who made it; reads
// are not logged.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// auditLog is the sandbox API server's audit log of writes: it tells the writes of the autoscaling processes (the
// scheduler binaries and Karpenter's controller, which run beside the benchmark) from the sandbox's own (this
// process: the API server, kwok's simulated kubelets, kube-controller-manager, the benchmark's client).
type auditLog struct {
	path string
	// args are the kube-apiserver flags that write it
	args []string
}

func newAuditLog(b *testing.B) *auditLog {
	dir := b.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "audit.log")
	return &auditLog{path: path, args: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + path,
		"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0"}} // 0: one file, never rotated
}

// offset is how much of the log is written now: writesSince counts from there.
func (a *auditLog) offset(b *testing.B) int64 {
	st, err := os.Stat(a.path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// auditEvent is what the count reads of an audit event.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// autoscalerWrites counts the writes logged since offset that the processes beside the benchmark made, by "VERB
// resource[/subresource]" in the names apiserver_request_total gives them, and the number of them by user agent
// (its program name).
func (a *auditLog) autoscalerWrites(b *testing.B, offset int64) (byKind, byAgent map[string]float64) {
	f, err := os.Open(a.path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	self := filepath.Base(os.Args[0]) + "/"
	byKind, byAgent = map[string]float64{}, map[string]float64{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			b.Fatalf("audit log %s: %v", a.path, err)
		}
		if strings.HasPrefix(e.UserAgent, self) || strings.HasPrefix(e.UserAgent, "kube-apiserver/") || e.ObjectRef == nil {
			continue
		}
		key := requestVerb(e.Verb) + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			key += "/" + e.ObjectRef.Subresource
		}
		byKind[key]++
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		byAgent[agent]++
	}
	if err := scanner.Err(); err != nil {
		b.Fatal(err)
	}
	return byKind, byAgent
}

// requestVerb is the HTTP verb apiserver_request_total names an audit event's verb with.
func requestVerb(verb string) string {
	switch verb {
	case "create":
		return "POST"
	case "update":
		return "PUT"
	case "patch":
		return "PATCH"
	case "delete":
		return "DELETE"
	case "deletecollection":
		return "DELETECOLLECTION"
	}
	return fmt.Sprintf("%q", verb)
}
