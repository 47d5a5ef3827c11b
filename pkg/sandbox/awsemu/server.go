/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package awsemu is an AWS emulator for the sandbox and the tests: an HTTP server on loopback speaking the real
// wire protocols of the calls Stevedore makes — EC2 and IAM Query (form-encoded requests, XML responses), EKS REST, SQS JSON 1.0,
// SSM and Pricing JSON 1.1 — so that the unmodified aws-sdk-go-v2 clients talk to it exactly as to AWS. Its state
// (subnets, security groups, AMIs, launch templates, instances with their lifecycle, capacity pools, queues) can
// be inspected and faults injected.
package awsemu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"

	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
)

const amazonAccount = "137112412989"

// Options configure an emulator.
type Options struct {
	// ClusterName tags the subnets and security groups for discovery (karpenter.sh/discovery: <name>) and names
	// the node role IAM knows from the start (KarpenterNodeRole-<name>, as the getting-started guides create it).
	ClusterName string
	// Catalog seeds the instance types, zones and prices; default the embedded catalog.
	Catalog *catalog.File
	// KubernetesVersions ("1.37") are the minors whose EKS-optimized AMIs and SSM parameters the emulator
	// publishes; default KubernetesMinors.
	KubernetesVersions []string
	// Clock, default the real one.
	Clock clock.WithDelayedExecution
}

// Emulator is a running AWS emulator.
type Emulator struct {
	EC2 *EC2
	SQS *SQS
	SSM *SSM
	IAM *IAM

	pricing  *pricing
	region   string
	server   *http.Server
	listener net.Listener
	url      string

	mu     sync.Mutex
	faults []*Fault
	calls  map[string]int // by service and action: "EC2.DescribeSubnets", "AmazonSSM.GetParameter"
	// cluster is what eks:DescribeCluster answers for clusterName (SetCluster)
	cluster     *Cluster
	clusterName string
}

// Start serves an emulator on a free loopback port. It never listens on another interface.
func Start(opts Options) (*Emulator, error) {
	if opts.Catalog == nil {
		opts.Catalog = catalog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if len(opts.KubernetesVersions) == 0 {
		opts.KubernetesVersions = KubernetesMinors()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emulator listener: %w", err)
	}
	const account = "111122223333"
	region := opts.Catalog.Region
	e := &Emulator{
		EC2:      newEC2(region, account, opts.Catalog, opts.Clock),
		SQS:      newSQS(account, opts.Clock),
		SSM:      newSSM(),
		IAM:      newIAM(account, catalog.PartitionOf(region), opts.Clock),
		pricing:  newPricing(opts.Catalog),
		region:   region,
		listener: l,
		url:      "http://" + l.Addr().String(),

		clusterName: opts.ClusterName,
	}
	e.SQS.baseURL = e.url
	e.EC2.seedNetwork(opts.ClusterName, opts.Catalog.Zones())
	e.EC2.iam = e.IAM
	e.IAM.AddRole("KarpenterNodeRole-" + opts.ClusterName)
	for _, k8s := range opts.KubernetesVersions {
		e.seedImages(k8s)
	}
	e.server = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	// One connection per request. The SDK closes a request's body once the response's headers are back, and its
	// closed body's WriteTo returns io.EOF; when net/http's transport drains the body after that (a loaded machine),
	// it takes the io.EOF for a failed write and closes the connection under the response being read ("use of
	// closed network connection"). Stevedore's provider sends bodies without WriteTo (pkg/cloud/aws, httpclient.go);
	// other SDK clients (tests, tools) do not, and with a connection per request they met it less often.
	e.server.SetKeepAlivesEnabled(false)
	go func() { _ = e.server.Serve(l) }()
	return e, nil
}

// The families and variants of the EKS-optimized AMIs seedImages registers.
const (
	familyAL2023       = "al2023"
	familyBottlerocket = "bottlerocket"
	variantStandard    = "standard"
	variantNVIDIA      = "nvidia"
	variantNeuron      = "neuron"
)

// KubernetesMinors are the minors whose EKS-optimized AMIs the emulator publishes by default.
func KubernetesMinors() []string { return []string{"1.34", "1.35", "1.36", "1.37", "1.38"} }

// Release is a release of an EKS-optimized AMI family as its alias pins it (al2023@v20261120), and when AWS
// published it.
type Release struct {
	Family, Version string
	Published       time.Time
}

// Releases are the releases of each family the emulator publishes, oldest first: the last of a family is what
// its @latest (AL2023's "recommended") parameters name.
func Releases() []Release {
	return []Release{
		{familyAL2023, "v20261001", time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)},
		{familyAL2023, "v20261120", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)},
		{familyBottlerocket, "v1.51.0", time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC)},
		{familyBottlerocket, "v1.52.0", time.Date(2026, 11, 18, 0, 0, 0, 0, time.UTC)},
	}
}

// seedImages registers the EKS-optimized AL2023 and Bottlerocket AMIs of a Kubernetes minor (standard, NVIDIA and
// Neuron variants, every release of Releases) and the public SSM parameters that name them, as AWS publishes them:
// a versioned parameter per release, and the latest (recommended) parameter naming the newest.
func (e *Emulator) seedImages(k8s string) {
	releases := Releases()
	for i, rel := range releases {
		newest := i == len(releases)-1 || releases[i+1].Family != rel.Family
		for _, img := range []struct{ variant, arch string }{
			{variantStandard, archAMD64}, {variantStandard, archARM64}, {variantNVIDIA, archAMD64}, {variantNVIDIA, archARM64},
			{variantNeuron, archAMD64},
		} {
			if rel.Family == familyBottlerocket && img.variant == variantNeuron {
				continue // Bottlerocket's standard x86_64 image serves Neuron types
			}
			name, params := imageParameters(k8s, rel, img.variant, ec2Arch(img.arch), newest)
			id := fmt.Sprintf("ami-0%x", sha256.Sum256([]byte(name)))[:21]
			e.EC2.images = append(e.EC2.images, &Image{ID: id, Name: name,
				Architecture: img.arch, OwnerID: amazonAccount, Created: rel.Published, Tags: map[string]string{}})
			for _, p := range params {
				e.SSM.Put(p, id)
			}
		}
	}
}

// imageParameters are the name AWS gives an image of a family's release, for a Kubernetes minor, variant and EC2
// architecture (x86_64, arm64), and the SSM parameters that name it (the release's, and the latest one's too when
// newest).
func imageParameters(k8s string, rel Release, variant, arch string, newest bool) (string, []string) {
	if rel.Family == familyAL2023 {
		base := "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/" + arch + "/" + variant + "/"
		name := "amazon-eks-node-al2023-" + arch + "-" + variant + "-" + k8s + "-" + rel.Version
		params := []string{base + name + "/image_id"}
		if newest {
			params = append(params, base+"recommended/image_id")
		}
		return name, params
	}
	stream := "aws-k8s-" + k8s
	if variant == variantNVIDIA {
		stream += "-nvidia"
	}
	version := strings.TrimPrefix(rel.Version, "v")
	params := []string{"/aws/service/bottlerocket/" + stream + "/" + arch + "/" + version + "/image_id"}
	if newest {
		params = append(params, "/aws/service/bottlerocket/"+stream+"/"+arch+"/latest/image_id")
	}
	return "bottlerocket-" + stream + "-" + arch + "-" + rel.Version, params
}

// AddImage registers an AMI owned by the account (for custom AMI selection and drift tests) and returns its id.
func (e *Emulator) AddImage(name, arch string, tags map[string]string) string {
	e.EC2.mu.Lock()
	defer e.EC2.mu.Unlock()
	id := e.EC2.newID("ami")
	e.EC2.images = append(e.EC2.images, &Image{ID: id, Name: name, Architecture: arch, OwnerID: e.EC2.accountID,
		Created: e.EC2.clock.Now(), Tags: cloneMap(tags)})
	return id
}

// RegisterImage registers an AMI owned by the account under a given id (an image a manifest names by id), unless
// that id is registered already.
func (e *Emulator) RegisterImage(id, name, arch string) {
	e.EC2.mu.Lock()
	defer e.EC2.mu.Unlock()
	if e.EC2.findImage(id) != nil {
		return
	}
	e.EC2.images = append(e.EC2.images, &Image{ID: id, Name: name, Architecture: arch, OwnerID: e.EC2.accountID,
		Created: e.EC2.clock.Now(), Tags: map[string]string{}})
}

// URL is the emulator's endpoint for every service.
func (e *Emulator) URL() string { return e.url }

// Region is the emulated region.
func (e *Emulator) Region() string { return e.region }

// SetHooks sets the instance lifecycle hooks.
func (e *Emulator) SetHooks(h InstanceHooks) {
	e.EC2.mu.Lock()
	defer e.EC2.mu.Unlock()
	e.EC2.hooks = h
}

// Stop shuts the server down.
func (e *Emulator) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.server.Shutdown(ctx)
}

// Fault is an injected failure: the next Times requests of Action (EC2 action name, or "SQS.ReceiveMessage" style
// for JSON services; "*" for any) answer with Code and Status after Delay. Times < 0 means every request until
// cleared. A Fault with a Delay and no Code only slows requests down. A Fault that Truncates answers as the request
// deserves but cuts the body in half and closes the connection (a response lost on the way).
type Fault struct {
	Action   string
	Code     string
	Message  string
	Status   int
	Delay    time.Duration
	Times    int
	Truncate bool
}

// InjectFault adds a fault.
func (e *Emulator) InjectFault(f Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.Status == 0 && f.Code != "" {
		f.Status = http.StatusServiceUnavailable
	}
	e.faults = append(e.faults, &f)
}

// ClearFaults removes every injected fault.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

// takeFault returns the fault for action, consuming one of its times.
func (e *Emulator) takeFault(action string) *Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, f := range e.faults {
		if f.Action != action && f.Action != "*" {
			continue
		}
		out := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				e.faults = append(e.faults[:i], e.faults[i+1:]...)
			}
		}
		return &out
	}
	return nil
}

func (e *Emulator) count(call string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.calls == nil {
		e.calls = map[string]int{}
	}
	e.calls[call]++
}

// Calls returns how many requests of each service and action the emulator received ("EC2.DescribeSubnets",
// "AmazonSSM.GetParameter"), failed ones and injected faults included.
func (e *Emulator) Calls() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return cloneCounts(e.calls)
}

// serveJSON serves a request of a JSON service (SQS, SSM, pricing), which X-Amz-Target names with its action.
func (e *Emulator) serveJSON(w http.ResponseWriter, r *http.Request, target string, body []byte) {
	service, action, _ := strings.Cut(target, ".")
	e.count(service + "." + action)
	f := e.takeFault(service + "." + action)
	if f != nil && e.applyFault(w, r, f, true) {
		return
	}
	if f != nil && f.Truncate {
		truncated(w, func(w http.ResponseWriter) { e.serveJSONAction(w, r, service, action, target, body) })
		return
	}
	e.serveJSONAction(w, r, service, action, target, body)
}

// serveJSONAction serves a request of a JSON service once its faults are applied.
func (e *Emulator) serveJSONAction(w http.ResponseWriter, r *http.Request, service, action, target string, body []byte) {
	switch service {
	case "AmazonSQS":
		e.SQS.handle(w, r, action, body)
	case "AmazonSSM":
		e.SSM.handle(w, action, body)
	case "AWSPriceListService":
		e.pricing.handle(w, action, body)
	default:
		writeJSONError(w, http.StatusBadRequest, "UnknownOperationException", "UnknownOperationException", "unknown target "+target)
	}
}

// ServeHTTP dispatches by protocol: X-Amz-Target for the JSON services, the form's Action for EC2.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_emulator/") {
		e.serveControl(w, r)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		writeEC2Error(w, http.StatusForbidden, "AuthFailure", "requests must be signed with AWS Signature Version 4")
		return
	}
	if strings.HasPrefix(r.URL.Path, "/clusters/") {
		e.handleEKS(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		writeEC2Error(w, http.StatusBadRequest, "InvalidRequest", err.Error())
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		e.serveJSON(w, r, target, body)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		writeEC2Error(w, http.StatusBadRequest, codeInvalidParameterValue, "request body is not form-encoded: "+err.Error())
		return
	}
	q := parseQuery(form)
	if signedFor(r.Header.Get("Authorization")) == "iam" {
		e.count("IAM." + q.Str("Action"))
		if f := e.takeFault("IAM." + q.Str("Action")); f != nil && e.applyFault(w, r, f, false) {
			return
		}
		e.IAM.handle(w, q)
		return
	}
	e.count("EC2." + q.Str("Action"))
	f := e.takeFault(q.Str("Action"))
	if f != nil && e.applyFault(w, r, f, false) {
		return
	}
	if f != nil && f.Truncate {
		truncated(w, func(w http.ResponseWriter) { e.EC2.handle(w, q, form) })
		return
	}
	e.EC2.handle(w, q, form)
}

// truncated answers with what serve writes, its full length announced, but only the first half of its body, then
// closes the connection.
func truncated(w http.ResponseWriter, serve func(http.ResponseWriter)) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	serve(rec)
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(rec.body.Len()))
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes()[:rec.body.Len()/2])
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// recorder keeps a response in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

// applyFault delays and/or fails a request; it reports whether the response was written.
func (e *Emulator) applyFault(w http.ResponseWriter, r *http.Request, f *Fault, jsonProtocol bool) bool {
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if f.Code == "" {
		return false
	}
	msg := f.Message
	if msg == "" {
		msg = "injected fault " + f.Code
	}
	if jsonProtocol {
		writeJSONError(w, f.Status, f.Code, f.Code, msg)
	} else {
		writeEC2Error(w, f.Status, f.Code, msg)
	}
	return true
}

func writeXML(w http.ResponseWriter, v any) {
	out, err := xml.Marshal(v)
	if err != nil {
		writeEC2Error(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	// every response element carries the EC2 namespace, as AWS writes it
	if i := strings.IndexByte(string(out), '>'); i > 0 {
		out = append([]byte(string(out[:i])+` xmlns="`+ec2Namespace+`"`), out[i:]...)
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

func writeEC2Error(w http.ResponseWriter, status int, code, message string) {
	var resp ec2ErrorResponse
	resp.Errors.Error.Code, resp.Errors.Error.Message, resp.RequestID = code, message, uuid.NewString()
	out, _ := xml.Marshal(resp)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

func writeJSON(w http.ResponseWriter, version string, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "InternalFailure", "InternalFailure", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-"+version)
	w.Header().Set("x-amzn-RequestId", uuid.NewString())
	_, _ = w.Write(out)
}

// writeJSONError writes an AWS JSON protocol error; queryCode is the legacy code SQS also reports.
func writeJSONError(w http.ResponseWriter, status int, typ, queryCode, message string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", uuid.NewString())
	if queryCode != "" {
		w.Header().Set("x-amzn-query-error", queryCode+";Sender")
	}
	w.WriteHeader(status)
	out, _ := json.Marshal(map[string]string{"__type": typ, "message": message})
	_, _ = w.Write(out)
}

func epochSeconds(t time.Time) float64 {
	return math.Round(float64(t.UnixMilli())) / 1000
}
