package tools

import "github.com/modelcontextprotocol/go-sdk/mcp"

// WithServerCard makes the server serve its card at
// /.well-known/mcp/server-card.json (server/card.go).
func WithServerCard(on bool) Option { return func(o *options) { o.serverCard = on } }

// ServerCardOf reports whether opts turn the server card on.
func ServerCardOf(opts ...Option) bool {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o.serverCard
}

// ResourceTemplates are the URI templates of the catalog's resources.
func (c *Catalog) ResourceTemplates() []string {
	out := []string{}
	for _, k := range resourceKinds {
		out = append(out, ResourceScheme+k.prefix+"/{id}"+k.suffix)
	}
	return append(out, MediaPrefix+"{id}")
}

// Prompts are the catalog's prompts.
func (c *Catalog) Prompts() []*mcp.Prompt {
	var out []*mcp.Prompt
	for _, p := range promptDefs {
		out = append(out, p.prompt)
	}
	return out
}
