/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// ZoneIDs maps zone names to their IDs (us-east-1a to use1-az1): an account's own mapping, learnt from its subnets.
// A zone's ID follows from the zone, so a requirement on topology.k8s.aws/zone-id is read as one on
// topology.kubernetes.io/zone (Translate), and a node gets the ID of its zone as a label.
type ZoneIDs map[string]string

// ID returns a zone's ID ("" when not known).
func (z ZoneIDs) ID(zone string) string { return z[zone] }

// Translate returns reqs with its requirement on the zone ID (if any) replaced by one on the zone: the zones whose
// ID it allows, intersected with what reqs already says of the zone. Without a mapping, reqs is returned as is.
func (z ZoneIDs) Translate(reqs Requirements) Requirements {
	r, ok := reqs[stevedorev1.LabelZoneID]
	if !ok || len(z) == 0 {
		return reqs
	}
	out := reqs.Clone()
	delete(out, stevedorev1.LabelZoneID)
	var zones []string
	for zone, id := range z {
		if r.Has(id) {
			zones = append(zones, zone)
		}
	}
	sort.Strings(zones)
	out.Add(MustRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
	return out
}

// TranslateKey returns the key a zone-ID key stands for (the zone), or key itself.
func (z ZoneIDs) TranslateKey(key string) string {
	if key == stevedorev1.LabelZoneID && len(z) > 0 {
		return corev1.LabelTopologyZone
	}
	return key
}
