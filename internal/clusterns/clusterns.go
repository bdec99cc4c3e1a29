// Package clusterns readies a namespace of its own on a shared Temporal
// cluster (make cluster): registered from the cluster's default
// namespace, described by the frontend, and carrying the search
// attributes the workflows set, usable by a start. The e2e harness on the
// cluster and the scale bench both use it.
package clusterns

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

// SearchAttributes are the keyword attributes the workflows set.
var SearchAttributes = []string{"AdoptionNode", "AdoptionPhase", "AdoptionAttention"}

// Delete deletes namespace ns, if it exists, and returns once its name is
// free: the server renames a deleted namespace at once and removes its
// data in the background.
func Delete(ctx context.Context, admin client.Client, ns string) error {
	_, err := admin.OperatorService().DeleteNamespace(ctx, &operatorservice.DeleteNamespaceRequest{Namespace: ns})
	var gone *serviceerror.NamespaceNotFound
	if err != nil && !errors.As(err, &gone) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	for {
		_, err := admin.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		if errors.As(err, &gone) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is still described after its deletion: %v", ns, err)
		case <-time.After(time.Second):
		}
	}
}

// Settled waits until every service reads namespace ns as the one
// registered last: after a namespace of the same name was deleted, a
// service's cache may still map the name to the deleted one for a while
// (its refresh interval), and a poll then fails ("Namespace ID is not
// found") or a Worker Deployment of the deleted namespace is read as
// current. A task queue described without error and no deployment named
// deployment mean the name resolves to the new namespace.
func Settled(ctx context.Context, admin client.Client, ns, deployment string) error {
	var last error
	for {
		_, last = admin.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: "adoption-settled-probe"}})
		if last == nil {
			_, last = admin.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
				Namespace: ns, DeploymentName: deployment})
			var nf *serviceerror.NotFound
			if errors.As(last, &nf) {
				return nil
			}
			if last == nil {
				last = fmt.Errorf("Worker Deployment %s is still described (a deleted namespace's)", deployment)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is not yet read as the new one everywhere: %v", ns, last)
		case <-time.After(time.Second):
		}
	}
}

// Ensure registers namespace ns through admin (a client of a namespace
// that exists, e.g. default: a client of one that does not yet exist is
// refused at its dial), waits until the frontend describes it, adds the
// search attributes, and waits until a workflow started through a client
// of ns (dial) that sets each of them is accepted: listed is not yet known
// to every service, the history service refuses such a start ("no mapping
// defined") until its namespace cache has them. probeID names the probe
// workflow, which is terminated at once. ctx bounds the wait.
func Ensure(ctx context.Context, admin client.Client, ns, probeID string, retention time.Duration, dial func() (client.Client, error)) error {
	_, err := admin.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(retention)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", ns, err)
	}
	for {
		_, err := admin.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s was registered but is not described: %w", ns, err)
		case <-time.After(time.Second):
		}
	}
	want := map[string]enumspb.IndexedValueType{}
	for _, a := range SearchAttributes {
		want[a] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	var last error
	for ctx.Err() == nil {
		got, err := admin.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err == nil && hasAll(got.GetCustomAttributes(), want) {
			if last = startsWith(ctx, dial, probeID, want); last == nil {
				return nil
			}
		}
		_, last = admin.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: want})
		if last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("namespace %s: the search attributes %v are not usable: %v", ns, SearchAttributes, last)
}

// startsWith starts and terminates a workflow that sets every attribute
// in want: nil once the namespace takes them.
func startsWith(ctx context.Context, dial func() (client.Client, error), id string, want map[string]enumspb.IndexedValueType) error {
	nc, err := dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	var attrs []temporal.SearchAttributeUpdate
	for a := range want {
		attrs = append(attrs, temporal.NewSearchAttributeKeyKeyword(a).ValueSet("namespace-probe"))
	}
	run, err := nc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: id,
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...)}, "NamespaceProbe")
	if err != nil {
		return err
	}
	return nc.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "the check that the namespace's search attributes are usable")
}

func hasAll(got, want map[string]enumspb.IndexedValueType) bool {
	for k := range want {
		if _, ok := got[k]; !ok {
			return false
		}
	}
	return true
}
