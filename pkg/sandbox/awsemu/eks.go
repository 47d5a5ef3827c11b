/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// Cluster is the EKS cluster the emulator describes (eks:DescribeCluster).
type Cluster struct {
	// Endpoint is the API server URL; CA its certificate authority, PEM.
	Endpoint string
	CA       []byte
	// ServiceIPv4CIDR or, when IPFamily is "ipv6", ServiceIPv6CIDR is the Service range.
	ServiceIPv4CIDR, ServiceIPv6CIDR string
	IPFamily                         string
	// Version is the Kubernetes minor version ("1.37").
	Version string
}

// handleEKS serves the EKS REST API's DescribeCluster (GET /clusters/<name>).
func (e *Emulator) handleEKS(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/clusters/")
	e.count("EKS.DescribeCluster")
	if f := e.takeFault("EKS.DescribeCluster"); f != nil && e.applyFault(w, r, f, true) {
		return
	}
	e.mu.Lock()
	c := e.cluster
	e.mu.Unlock()
	if r.Method != http.MethodGet || strings.Contains(name, "/") {
		writeRESTError(w, http.StatusNotFound, "NotFoundException", "unknown EKS operation "+r.Method+" "+r.URL.Path)
		return
	}
	if c == nil || name != e.clusterName {
		writeRESTError(w, http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+name+".")
		return
	}
	family := c.IPFamily
	if family == "" {
		family = "ipv4"
	}
	network := map[string]any{"ipFamily": family}
	if family == "ipv6" {
		network["serviceIpv6Cidr"] = c.ServiceIPv6CIDR
	} else {
		network["serviceIpv4Cidr"] = c.ServiceIPv4CIDR
	}
	out, _ := json.Marshal(map[string]any{"cluster": map[string]any{
		"name": name, "arn": "arn:" + e.EC2.partition + ":eks:" + e.region + ":111122223333:cluster/" + name, "status": "ACTIVE",
		"version": c.Version, "endpoint": c.Endpoint,
		"certificateAuthority":    map[string]string{"data": base64.StdEncoding.EncodeToString(c.CA)},
		"kubernetesNetworkConfig": network,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-RequestId", uuid.NewString())
	_, _ = w.Write(out)
}

// writeRESTError writes an error of a REST-JSON service (EKS) as AWS does.
func writeRESTError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-RequestId", uuid.NewString())
	w.Header().Set("x-amzn-ErrorType", code)
	w.WriteHeader(status)
	out, _ := json.Marshal(map[string]string{"message": message})
	_, _ = w.Write(out)
}

// SetCluster sets what DescribeCluster answers for the emulator's cluster; until it is set, the cluster is not
// found.
func (e *Emulator) SetCluster(c Cluster) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cluster = &c
}
