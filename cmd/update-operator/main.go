// Command update-operator drives Bottlerocket OS updates through
// BottlerocketShadows: it keeps a shadow per managed node and moves each
// node through its update one state at a time, with enforced deadlines and
// node readiness as the health gate after each reboot.
package main

import (
	"os"

	"nodehealth.io/nodehealth/cmd/update-operator/app"
	"nodehealth.io/nodehealth/pkg/componentconfig/options"
)

func main() {
	os.Exit(options.Run(app.NewCommand()))
}
