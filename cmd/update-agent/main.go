// Command update-agent is the per-node Bottlerocket update agent: it acts on
// its node's BottlerocketShadow and talks to the Bottlerocket API.
package main

import (
	"os"

	"nodehealth.io/nodehealth/cmd/update-agent/app"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
)

func main() {
	os.Exit(options.Run(app.NewCommand()))
}
