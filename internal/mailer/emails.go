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

package mailer

import (
	"fmt"
	"strings"
)

// The Mailgun user variables naming the requesting object (Request.Var).
const (
	VarCluster = "mailguncluster"
	VarMachine = "mailgunmachine"
)

// ClusterEmail is what the request email of a MailgunCluster says.
type ClusterEmail struct {
	Priority string
	// Request is the requester's free text.
	Request   string
	Requester string
	// Object is the MailgunCluster's namespace/name, UID its UID.
	Object string
	UID    string
}

// Email is the request email, sent with messageID.
func (e ClusterEmail) Email(messageID string) Request {
	return Request{
		MessageID: messageID,
		Subject:   fmt.Sprintf("[%s] New Cluster requested", e.Priority),
		Text:      fmt.Sprintf("Hello! One cluster please.\n\n%s\n", e.Request),
		Requester: e.Requester,
		Var:       VarCluster,
		Object:    e.Object,
		UID:       e.UID,
	}
}

// MachineEmail is what the request email of a MailgunMachine says: what
// Cluster API knows of the machine, and what the builder must do for the
// machine to join. It names where the bootstrap data is and never holds
// it: the data carries join tokens and, for control-plane machines, the
// cluster's CA keys.
type MachineEmail struct {
	Priority string
	// Cluster, Machine and Object (the MailgunMachine) are namespace/name.
	Cluster string
	Machine string
	Object  string
	UID     string
	// Role is "control-plane" or "worker".
	Role string
	// MachineDeployment and MachineSet are names, "" for a Machine that
	// no MachineDeployment or MachineSet created.
	MachineDeployment string
	MachineSet        string
	// Version is the Kubernetes version, "" if the Machine names none.
	Version       string
	FailureDomain string
	ProviderID    string
	// BootstrapSecret is the namespace/name of the Secret holding the
	// bootstrap data, in key "value".
	BootstrapSecret string
	// ControlPlaneEndpoint is host:port, "" if not known yet.
	ControlPlaneEndpoint string
	// Request is the requester's free text, if any.
	Request string
}

// Email is the request email, sent with messageID.
func (e MachineEmail) Email(messageID string) Request {
	or := func(v, otherwise string) string {
		if v == "" {
			return otherwise
		}
		return v
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Hello! One machine please, for cluster %s.\n\n", e.Cluster)
	for _, line := range [][2]string{
		{"Role", e.Role},
		{"Kubernetes version", or(e.Version, "not set")},
		{"Failure domain", or(e.FailureDomain, "any")},
		{"Control plane endpoint", or(e.ControlPlaneEndpoint, "not known yet")},
		{"Machine", e.Machine},
		{"MachineDeployment", or(e.MachineDeployment, "none")},
		{"MachineSet", or(e.MachineSet, "none")},
		{"MailgunMachine", e.Object},
	} {
		fmt.Fprintf(&b, "%-23s %s\n", line[0]+":", line[1])
	}
	fmt.Fprintf(&b, "\nStart the machine's kubelet with --provider-id=%s: Cluster API finds the machine's Node by it.\n", e.ProviderID)
	fmt.Fprintf(&b, "Bootstrap the machine with the data in key \"value\" of Secret %s. This email does not contain it: it holds join credentials.\n", e.BootstrapSecret)
	if e.Request != "" {
		fmt.Fprintf(&b, "\n%s\n", e.Request)
	}
	return Request{
		MessageID: messageID,
		Subject:   fmt.Sprintf("[%s] New %s Machine requested for cluster %s", e.Priority, e.Role, e.Cluster),
		Text:      b.String(),
		Var:       VarMachine,
		Object:    e.Object,
		UID:       e.UID,
	}
}
