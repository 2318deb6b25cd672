package approvectl

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newLogoutCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the token approvectl login cached for this server",
		Long: `Remove the token approvectl login cached for the server chosen by --server /
$TOLLGATE_SERVER (its ID token and refresh token). Other servers' tokens stay.
Says so when there was none; that is not an error.

The refresh token is not revoked at the provider; it stops being usable when
the provider expires it (or revoke the session at the provider).`,
		Example: `  approvectl logout
  approvectl logout --server tollgate.acme.example:443`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server := g.serverAddr()
			c, err := g.tokenCache()
			if err != nil {
				return &exitError{code: ExitInternal, err: err}
			}
			removed, err := c.remove(server)
			if err != nil {
				return &exitError{code: ExitInternal, err: err}
			}
			if g.json() {
				return g.printJSON(struct {
					Server  string `json:"server"`
					Removed bool   `json:"removed"`
					Cache   string `json:"cache"`
				}{server, removed, c.path(server)})
			}
			if removed {
				fmt.Fprintf(g.cfg.Stdout, "Signed out of %s: removed %s\n", server, c.path(server))
			} else {
				fmt.Fprintf(g.cfg.Stdout, "Not signed in to %s: no cached token at %s\n", server, c.path(server))
			}
			return nil
		},
	}
}
