/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"encoding/json"
	"net/http"
	"runtime/debug"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	genericapiserver "k8s.io/apiserver/pkg/server"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
)

// unlinkedVersion returns what /version should say when this binary was linked without Kubernetes' version (a
// test binary: the release binaries set it at link time, and the API server would report v0.0.0-master, which
// clients such as Kueue's manager refuse to parse): the effective version's fields with the git version of the
// k8s.io/kubernetes module it was built from. nil when the binary has its version.
func unlinkedVersion(ev basecompatibility.EffectiveVersion) *apimachineryversion.Info {
	if _, err := utilversion.ParseSemantic(baseversion.Get().GitVersion); err == nil {
		return nil
	}
	info := ev.Info()
	if info == nil {
		return nil
	}
	info.GitVersion = "v" + baseversion.DefaultKubeBinaryVersion + ".0"
	if build, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range build.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				info.GitVersion = dep.Version
				if dep.Replace != nil && dep.Replace.Version != "" {
					info.GitVersion = dep.Replace.Version
				}
			}
		}
	}
	return info
}

// serveVersion makes a server's handler chain answer GET /version with info.
func serveVersion(config *genericapiserver.Config, info *apimachineryversion.Info) {
	chain := config.BuildHandlerChainFunc
	config.BuildHandlerChainFunc = func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		next := chain(apiHandler, c)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/version" || r.Method != http.MethodGet {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(info)
		})
	}
}
