// Package client builds the Kubernetes clients Stevedore uses from one rest.Config.
package client

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
)

// NewStevedore returns a clientset for Stevedore's resources. Custom resources have no protobuf encoding, so
// the configuration is copied to speak JSON even when the scheduler's own connection prefers protobuf.
func NewStevedore(cfg *rest.Config) (versioned.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	return versioned.NewForConfig(c)
}
