// Package manifest reads Kubernetes objects from YAML or JSON files, as kubectl would: multi-document YAML, JSON,
// and v1 Lists, decoded into typed core, apps, policy and Stevedore objects.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Decoder decodes the object kinds Stevedore's tools read.
type Decoder struct {
	codecs serializer.CodecFactory
}

// NewDecoder returns a Decoder that knows core/v1, apps/v1, policy/v1 and stevedore.dev/v1.
func NewDecoder() *Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, stevedorev1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // only on a programming error: the schemes above are static
		}
	}
	return &Decoder{codecs: serializer.NewCodecFactory(scheme, serializer.EnableStrict)}
}

// Decode reads every object from r, flattening Lists.
func (d *Decoder) Decode(r io.Reader) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	deserializer := d.codecs.UniversalDeserializer()
	var out []runtime.Object
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		obj, _, err := deserializer.Decode(raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if list, ok := obj.(*corev1.List); ok {
			items, err := d.decodeList(list)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			out = append(out, items...)
			continue
		}
		out = append(out, obj)
	}
}

func (d *Decoder) decodeList(list *corev1.List) ([]runtime.Object, error) {
	var out []runtime.Object
	for i, item := range list.Items {
		obj, _, err := d.codecs.UniversalDeserializer().Decode(item.Raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("list item %d: %w", i, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// DecodeFile reads every object of a file.
func (d *Decoder) DecodeFile(path string) ([]runtime.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	objs, err := d.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Name returns "kind/name" or "kind/namespace/name" of an object for messages.
func Name(obj runtime.Object) string {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if acc.GetNamespace() != "" {
		return kind + "/" + acc.GetNamespace() + "/" + acc.GetName()
	}
	return kind + "/" + acc.GetName()
}

func isOnlyComments(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
