/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

func TestClusterOfTakesNothingEKSDoesNotSay(t *testing.T) {
	ca := &ekstypes.Certificate{Data: aws.String("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==")}
	tests := []struct {
		name        string
		cluster     *ekstypes.Cluster
		wantCIDR    string
		wantFamily  string
		wantErrText string
	}{
		{name: "ipv4", cluster: &ekstypes.Cluster{Endpoint: aws.String("https://x.eks"), CertificateAuthority: ca,
			KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{IpFamily: ekstypes.IpFamilyIpv4, ServiceIpv4Cidr: aws.String("172.20.0.0/16")}},
			wantCIDR: "172.20.0.0/16", wantFamily: "ipv4"},
		{name: "ipv6", cluster: &ekstypes.Cluster{Endpoint: aws.String("https://x.eks"), CertificateAuthority: ca,
			KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{IpFamily: ekstypes.IpFamilyIpv6, ServiceIpv4Cidr: aws.String("172.20.0.0/16"),
				ServiceIpv6Cidr: aws.String("fd30:1c53:5f8a::/108")}},
			wantCIDR: "fd30:1c53:5f8a::/108", wantFamily: "ipv6"},
		{name: "no endpoint yet", cluster: &ekstypes.Cluster{Status: ekstypes.ClusterStatusCreating, CertificateAuthority: ca},
			wantErrText: "no endpoint"},
		{name: "no certificate authority", cluster: &ekstypes.Cluster{Endpoint: aws.String("https://x.eks")}, wantErrText: "certificate authority"},
		{name: "no network configuration", cluster: &ekstypes.Cluster{Endpoint: aws.String("https://x.eks"), CertificateAuthority: ca},
			wantErrText: "kubernetesNetworkConfig"},
		{name: "ipv6 without its range", cluster: &ekstypes.Cluster{Endpoint: aws.String("https://x.eks"), CertificateAuthority: ca,
			KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{IpFamily: ekstypes.IpFamilyIpv6, ServiceIpv4Cidr: aws.String("172.20.0.0/16")}},
			wantErrText: "service CIDR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clusterOf("prod", tc.cluster)
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ServiceCIDR != tc.wantCIDR || got.IPFamily != tc.wantFamily || !strings.HasPrefix(string(got.CABundle), "-----BEGIN") {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestDescribeClusterAsksEKS(t *testing.T) {
	emu, err := awsemu.Start(awsemu.Options{ClusterName: testCluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	env := map[string]string{"AWS_ENDPOINT_URL": emu.URL(), "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_EC2_METADATA_DISABLED": "true"}
	lookup := func(k string) string { return env[k] }
	if _, err := DescribeCluster(testCtx(t), "us-east-1", testCluster, lookup); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("a cluster EKS does not know: %v, want ResourceNotFoundException", err)
	}
	emu.SetCluster(awsemu.Cluster{Endpoint: "https://api.test", CA: []byte("-----BEGIN CERTIFICATE-----\n"), ServiceIPv4CIDR: "10.100.0.0/16", Version: "1.37"})
	got, err := DescribeCluster(testCtx(t), "us-east-1", testCluster, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoint != "https://api.test" || got.ServiceCIDR != "10.100.0.0/16" || got.IPFamily != "ipv4" {
		t.Errorf("DescribeCluster = %+v", got)
	}
	if _, err := DescribeCluster(testCtx(t), "us-east-1", "other", lookup); err == nil {
		t.Error("another cluster's name was described")
	}
}
