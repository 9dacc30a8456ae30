/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package send

import (
	"context"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// testKind is a Kind for MailgunClusters, as a reconciler would declare it.
var testKind = Kind[*infrav1.MailgunCluster]{
	Name:            "MailgunCluster",
	MessageIDPrefix: "mailguncluster",
	Finalizer:       infrav1.ClusterFinalizer,
	StatusMessageID: func(mc *infrav1.MailgunCluster) *string { return &mc.Status.MessageID },
	SetProvisioned: func(mc *infrav1.MailgunCluster, provisioned bool) {
		mc.Status.Initialization.Provisioned = nil
		if provisioned {
			mc.Status.Initialization.Provisioned = ptr.To(true)
		}
	},
	Paused: func(context.Context, client.Reader, *infrav1.MailgunCluster) (bool, error) { return false, nil },
}
