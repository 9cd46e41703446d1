package kubectlplugin

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completionTimeout bounds the API request behind a completion: a shell
// waiting on an unreachable cluster is worse than no suggestion.
const completionTimeout = 5 * time.Second

// completeNodes completes node names for a command's first maxArgs
// arguments (0: every argument), leaving out those already given.
func completeNodes(o *Options, maxArgs int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if maxArgs > 0 && len(args) >= maxArgs {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		client, err := o.NewClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
		defer cancel()
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(list.Items))
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		return matching(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeShadows completes the names of nodes with a BottlerocketShadow
// (the nodes the update operator manages).
func completeShadows(o *Options, maxArgs int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if maxArgs > 0 && len(args) >= maxArgs {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		client, err := o.NewShadowClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
		defer cancel()
		list, err := client.UpdatesV1alpha1().BottlerocketShadows().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(list.Items))
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return matching(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func completionContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// matching returns the sorted names that start with prefix and are not in
// given.
func matching(names, given []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !slices.Contains(given, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
