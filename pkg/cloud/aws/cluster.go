/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// Cluster is what new nodes need to know of the EKS cluster they join.
type Cluster struct {
	// Endpoint is the API server URL.
	Endpoint string
	// CABundle is the cluster's certificate authority, PEM.
	CABundle []byte
	// ServiceCIDR is the range Services take their cluster IPs from (IPv6 on an IPv6 cluster); the kubelet's
	// cluster DNS address is derived from it.
	ServiceCIDR string
	// IPFamily is ipv4 or ipv6.
	IPFamily string
}

// DescribeCluster asks EKS (eks:DescribeCluster) for the cluster's endpoint, certificate authority and service
// range. Nothing is guessed: an answer that lacks one of them is an error naming what is missing.
func DescribeCluster(ctx context.Context, region, name string, env func(string) string) (*Cluster, error) {
	if env == nil {
		env = os.Getenv
	}
	cfg, err := sdkConfig(ctx, region, env)
	if err != nil {
		return nil, err
	}
	client := eks.NewFromConfig(cfg, func(o *eks.Options) {
		for _, k := range []string{"AWS_ENDPOINT_URL_EKS", "AWS_ENDPOINT_URL"} {
			if v := env(k); v != "" {
				o.BaseEndpoint = aws.String(v)
				return
			}
		}
	})
	out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("eks:DescribeCluster %s: %w", name, err)
	}
	return clusterOf(name, out.Cluster)
}

func clusterOf(name string, c *ekstypes.Cluster) (*Cluster, error) {
	if c == nil {
		return nil, fmt.Errorf("eks:DescribeCluster %s: the answer has no cluster", name)
	}
	out := &Cluster{Endpoint: aws.ToString(c.Endpoint)}
	if out.Endpoint == "" {
		return nil, fmt.Errorf("EKS cluster %s has no endpoint yet (status %s)", name, c.Status)
	}
	if c.CertificateAuthority == nil || aws.ToString(c.CertificateAuthority.Data) == "" {
		return nil, fmt.Errorf("EKS cluster %s has no certificate authority data", name)
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	if err != nil {
		return nil, fmt.Errorf("EKS cluster %s: certificate authority data: %w", name, err)
	}
	out.CABundle = ca
	nc := c.KubernetesNetworkConfig
	if nc == nil {
		return nil, fmt.Errorf("EKS cluster %s has no kubernetesNetworkConfig", name)
	}
	out.IPFamily = string(nc.IpFamily)
	switch nc.IpFamily {
	case ekstypes.IpFamilyIpv6:
		out.ServiceCIDR = aws.ToString(nc.ServiceIpv6Cidr)
	default:
		out.IPFamily = string(ekstypes.IpFamilyIpv4)
		out.ServiceCIDR = aws.ToString(nc.ServiceIpv4Cidr)
	}
	if _, _, err := net.ParseCIDR(out.ServiceCIDR); err != nil {
		return nil, fmt.Errorf("EKS cluster %s: service CIDR %q (%s): %w", name, out.ServiceCIDR, out.IPFamily, err)
	}
	return out, nil
}
