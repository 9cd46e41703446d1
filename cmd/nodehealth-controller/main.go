// Command nodehealth-controller keeps one aggregated readiness taint on every
// node current from the Leases of the node's system extensions.
package main

import (
	"os"

	"nodehealth.io/nodehealth/cmd/nodehealth-controller/app"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
)

func main() {
	os.Exit(options.Run(app.NewCommand()))
}
