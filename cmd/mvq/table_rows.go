package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// tableDeleteCmd is `mvq table delete NAME --where PRED`.
func (a *app) tableDeleteCmd() *cobra.Command {
	var where, branch string
	c := &cobra.Command{
		Use:   "delete NAME --where PREDICATE",
		Short: "Delete the rows of a table that match a SQL predicate",
		Long: `Deletes the rows of table NAME for which PREDICATE (a SQL boolean expression over
its columns) is true, as one new version. --where is required; --where true
deletes every row. Views over the table drop the deleted rows at their next refresh.`,
		Example: "  mvq table delete 'docs$articles' --where \"lang = 'fr'\"\n  mvq table delete 'docs$articles' --where 'id IN (3, 4)'",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(where) == "" {
				return usageErr("table delete needs --where PREDICATE (--where true deletes every row)")
			}
			body := map[string]any{"predicate": where}
			if branch != "" {
				body["branch"] = branch
			}
			var resp struct {
				Version uint64 `json:"version"`
				Deleted int64  `json:"num_deleted_rows"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/table/"+idPath(args[0])+"/delete", body, &resp); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "deleted %d rows of %s: version %d\n", resp.Deleted, args[0], resp.Version)
			return nil
		},
	}
	c.Flags().StringVar(&where, "where", "", "SQL predicate of the rows to delete")
	c.Flags().StringVar(&branch, "branch", "", "delete on this branch instead of main")
	return c
}

// tableUpdateCmd is `mvq table update NAME --set COL=EXPR ... [--where PRED]`.
func (a *app) tableUpdateCmd() *cobra.Command {
	var (
		sets          []string
		where, branch string
	)
	c := &cobra.Command{
		Use:   "update NAME --set COLUMN=EXPRESSION... [--where PREDICATE]",
		Short: "Set columns of the rows that match a SQL predicate",
		Long: `Sets each COLUMN to the SQL EXPRESSION (over the row's current values) in the rows
of table NAME where PREDICATE is true (every row without --where), as one new
version. Repeat --set for several columns; the column name ends at the first =.`,
		Example: "  mvq table update 'docs$articles' --set \"lang='en'\" --where 'id = 3'\n  mvq table update 'docs$articles' --set 'title=upper(title)' --set 'views=views+1'",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sets) == 0 {
				return usageErr("table update needs at least one --set COLUMN=EXPRESSION")
			}
			updates := make([][]string, 0, len(sets))
			for _, s := range sets {
				col, expr, ok := strings.Cut(s, "=")
				col, expr = strings.TrimSpace(col), strings.TrimSpace(expr)
				if !ok || col == "" || expr == "" {
					return usageErr("--set %q: want COLUMN=EXPRESSION, e.g. --set \"lang='en'\"", s)
				}
				updates = append(updates, []string{col, expr})
			}
			body := map[string]any{"updates": updates}
			if cmd.Flags().Changed("where") {
				if strings.TrimSpace(where) == "" {
					return usageErr("--where is empty: leave it out to update every row")
				}
				body["predicate"] = where
			}
			if branch != "" {
				body["branch"] = branch
			}
			var resp struct {
				Version uint64 `json:"version"`
				Updated int64  `json:"updated_rows"`
			}
			if err := a.client().call(a.ctx, "POST", "/v1/table/"+idPath(args[0])+"/update", body, &resp); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "updated %d rows of %s: version %d\n", resp.Updated, args[0], resp.Version)
			return nil
		},
	}
	c.Flags().StringArrayVar(&sets, "set", nil, "COLUMN=EXPRESSION (repeatable)")
	c.Flags().StringVar(&where, "where", "", "SQL predicate of the rows to update (default: every row)")
	c.Flags().StringVar(&branch, "branch", "", "update on this branch instead of main")
	return c
}
