// Command nnp prints its effective user ID. Installed set-user-ID root in
// the nonewprivs image of the upstream node e2e suite, it shows whether
// allowPrivilegeEscalation let the bit take effect.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
