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

package controllers

// What a MailgunMachine waits for, what its email asks for and what its
// deletion tells: pure functions of the objects, which unit tests drive
// without an apiserver.

import (
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
)

// providerID is the provider ID of mm's machine.
func providerID(mm *infrav1.MailgunMachine) string {
	return infrav1.ProviderIDPrefix + string(mm.UID)
}

// machineNotReady says what the MailgunMachine waits for before its email
// may be sent, in the order Cluster API provides it; each wait ends with a
// change the watches report.
func machineNotReady(mm *infrav1.MailgunMachine, machine *clusterv1.Machine, cluster *clusterv1.Cluster, infraFound, clusterAPI bool) (reason, message string) {
	switch {
	case !clusterAPI:
		return infrav1.WaitingForClusterAPIReason, "Cluster API is not installed (the apiserver does not serve its Machine and Cluster kinds); waiting for it"
	case machine == nil:
		return infrav1.WaitingForMachineReason, "waiting for a Machine to own this MailgunMachine (Cluster API sets the owner reference)"
	case !machine.DeletionTimestamp.IsZero() || (cluster != nil && !cluster.DeletionTimestamp.IsZero()):
		return infrav1.WaitingForMachineReason, fmt.Sprintf("the Machine %s or its Cluster is being deleted; nothing is sent", machine.Name)
	}
	ref := machine.Spec.InfrastructureRef
	switch {
	case ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != "MailgunMachine" || ref.Name != mm.Name:
		return infrav1.NotMachineInfrastructureReason, fmt.Sprintf("the owner Machine %s names %s %s in spec.infrastructureRef, not this MailgunMachine; nothing is sent for it",
			machine.Name, ref.Kind, ref.Name)
	case cluster == nil:
		return infrav1.WaitingForClusterReason, fmt.Sprintf("waiting for the Cluster named by label %s (%q)", clusterv1.ClusterNameLabel, mm.Labels[clusterv1.ClusterNameLabel])
	case !infraFound || !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false):
		return infrav1.WaitingForClusterInfrastructureReason, fmt.Sprintf("waiting for the infrastructure of Cluster %s to be provisioned", cluster.Name)
	case machine.Spec.Bootstrap.DataSecretName != nil:
		return "", ""
	case !util.IsControlPlaneMachine(machine) && !ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false):
		return infrav1.WaitingForControlPlaneInitializedReason, fmt.Sprintf("waiting for the control plane of Cluster %s to be initialized before the worker's bootstrap data", cluster.Name)
	}
	return infrav1.WaitingForBootstrapDataReason, fmt.Sprintf("waiting for the bootstrap provider to set spec.bootstrap.dataSecretName of Machine %s", machine.Name)
}

// machineEmail is the request email of mm. It names the bootstrap data's
// Secret and never reads it.
func machineEmail(mm *infrav1.MailgunMachine, machine *clusterv1.Machine, cluster *clusterv1.Cluster) send.Email {
	role := "worker"
	if util.IsControlPlaneMachine(machine) {
		role = "control-plane"
	}
	endpoint := ""
	if ep := cluster.Spec.ControlPlaneEndpoint; ep.IsValid() {
		endpoint = ep.String()
	}
	email := mailer.MachineEmail{
		Priority:             string(mm.Spec.Priority),
		Cluster:              klog.KObj(cluster).String(),
		Machine:              klog.KObj(machine).String(),
		Object:               klog.KObj(mm).String(),
		UID:                  string(mm.UID),
		Role:                 role,
		MachineDeployment:    machine.Labels[clusterv1.MachineDeploymentNameLabel],
		MachineSet:           machine.Labels[clusterv1.MachineSetNameLabel],
		Version:              machine.Spec.Version,
		FailureDomain:        machine.Spec.FailureDomain,
		BootstrapSecret:      mm.Namespace + "/" + ptr.Deref(machine.Spec.Bootstrap.DataSecretName, ""),
		ControlPlaneEndpoint: endpoint,
		Request:              mm.Spec.Request,
	}
	return func(messageID string) mailer.Request {
		// Read at send time: the claim right before it sets the provider ID.
		email.ProviderID = mm.Spec.ProviderID
		return email.Email(messageID)
	}
}

// machineDeletedMessage is the Deleted event of mm: what the person who
// builds machines should take down by hand. recorded is the ID of the
// email Mailgun accepted, if any, and accepted the last one it accepted:
// while a resend is pending, recorded is empty but the email the resend
// replaces did request the machine.
func machineDeletedMessage(mm *infrav1.MailgunMachine, recorded, accepted string) string {
	pending := mm.GetAnnotations()[infrav1.MessageIDAnnotation]
	switch {
	case recorded != "":
		return fmt.Sprintf("MailgunMachine deleted: decommission machine %s (request email %q) by hand", mm.Spec.ProviderID, recorded)
	case accepted != "":
		return fmt.Sprintf("MailgunMachine deleted while Mailgun had not confirmed the resend %q: decommission machine %s (request email %q) by hand",
			pending, mm.Spec.ProviderID, accepted)
	case pending != "":
		return fmt.Sprintf("MailgunMachine deleted before Mailgun confirmed its request email %q: if Mailgun's logs show that Message-Id, decommission machine %s by hand",
			pending, mm.Spec.ProviderID)
	}
	return "MailgunMachine deleted before its request email was sent: no machine was requested"
}
