/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package test holds what unit tests across Stevedore share: builders for the objects decisions are made on
// (pods, nodes, DaemonSets, NodePools, NodeClaims) in the wrapper style of kube-scheduler's testing package, and
// listers backed by plain indexers so a controller can be given a cluster without an API server. The fake cloud is
// in pkg/cloud/fake, apart, so that the tests that do not need it do not build its catalog in. Integration tests use the real API server (test/integration) instead.
package test
