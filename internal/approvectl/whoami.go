package approvectl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
)

// whoamiResult is what whoami prints under -o json.
type whoamiResult struct {
	Server  string    `json:"server"`
	Source  string    `json:"source"` // --token, --as NAME, $TOLLGATE_TOKEN or "cache PATH"
	Issuer  string    `json:"issuer"`
	Subject string    `json:"subject"`
	Email   string    `json:"email,omitempty"`
	Groups  []string  `json:"groups"`
	Expiry  time.Time `json:"expiry,omitzero"`
	Expired bool      `json:"expired"`
	// Seen is who the server takes the caller for (WhoAmI); absent with
	// --local.
	Seen *serverView `json:"server_view,omitempty"`
}

// serverView is WhoAmI's answer.
type serverView struct {
	Subject string   `json:"subject"`
	Kind    string   `json:"kind"`
	Issuer  string   `json:"issuer"`
	Groups  []string `json:"groups"`
	Roles   []string `json:"roles"`
	Domain  string   `json:"domain"`
}

func newWhoamiCmd(g *globals) *cobra.Command {
	var local bool
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who your token says you are for this server",
		Long: `Show who the token approvectl would send to the server says you are: its
issuer, subject, groups and expiry, and where the token came from (--token,
--as, $TOLLGATE_TOKEN, or the cache approvectl login keeps). A cached token
about to expire is refreshed first, as before any call.

Then it asks the server who it takes you for (it checks the signature, the
issuer and the audience) and the roles policy gives you there now, directly
or through a group: "server" and "roles" below (server_view in -o json).
--local reads the token's claims only and asks no server.`,
		Example: `  approvectl whoami
  approvectl whoami --local
  approvectl whoami --server tollgate.acme.example:443 -o json | jq -r .server_view.roles[]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server := g.serverAddr()
			tok, source, err := g.bearerFrom(cmd.Context(), server)
			if err != nil {
				return err
			}
			cl, err := parseClaims(tok)
			if err != nil {
				return &exitError{code: ExitRefused, err: fmt.Errorf("the token from %s: %w", source, err)}
			}
			res := whoamiResult{Server: server, Source: source, Issuer: cl.Issuer, Subject: cl.Subject, Email: cl.Email,
				Groups: cl.groups(), Expiry: cl.expiry()}
			if res.Groups == nil {
				res.Groups = []string{}
			}
			now := g.cfg.Now()
			res.Expired = !res.Expiry.IsZero() && !res.Expiry.After(now)
			if !local {
				err := g.session(cmd, func(ctx context.Context, c *client) error {
					r, err := c.approvals.WhoAmI(ctx, &tollgatev1.WhoAmIRequest{})
					if err != nil {
						return rpcErr(err)
					}
					res.Seen = &serverView{Subject: r.GetSubject(), Kind: r.GetKind(), Issuer: r.GetIssuer(), Groups: nonNil(r.GetGroups()), Roles: nonNil(r.GetRoles()), Domain: r.GetDomain()}
					return nil
				})
				if err != nil {
					return err
				}
			}
			if g.json() {
				return g.printJSON(res)
			}
			w := g.cfg.Stdout
			fmt.Fprintf(w, "server   %s\n", res.Server)
			fmt.Fprintf(w, "subject  %s\n", orDash(res.Subject))
			if res.Email != "" {
				fmt.Fprintf(w, "email    %s\n", res.Email)
			}
			fmt.Fprintf(w, "issuer   %s\n", orDash(res.Issuer))
			fmt.Fprintf(w, "groups   %s\n", orDash(strings.Join(res.Groups, ", ")))
			switch {
			case res.Expiry.IsZero():
				fmt.Fprintf(w, "expires  never (no exp claim)\n")
			case res.Expired:
				fmt.Fprintf(w, "expires  %s (expired)\n", res.Expiry.Local().Format("2006-01-02 15:04:05"))
			default:
				fmt.Fprintf(w, "expires  %s (in %s)\n", res.Expiry.Local().Format("2006-01-02 15:04:05"), res.Expiry.Sub(now).Round(time.Second))
			}
			fmt.Fprintf(w, "token    %s\n", res.Source)
			if v := res.Seen; v != nil {
				fmt.Fprintf(w, "seen as  %s (%s), signed by %s\n", v.Subject, v.Kind, orDash(v.Issuer))
				fmt.Fprintf(w, "roles    %s (domain %s)\n", orDash(strings.Join(v.Roles, ", ")), v.Domain)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&local, "local", false, "read the token's claims only; ask no server")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
