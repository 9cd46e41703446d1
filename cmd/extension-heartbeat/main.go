// Command extension-heartbeat is the sidecar that renews an extension's
// Lease while a local health probe succeeds.
package main

import (
	"os"

	"nodehealth.io/nodehealth/cmd/extension-heartbeat/app"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
)

func main() {
	app.SetMaxProcs()
	os.Exit(options.Run(app.NewCommand()))
}
