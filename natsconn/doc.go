// Package natsconn connects to a NATS server and its JetStream API as the
// nats CLI's users expect: a Config of the usual settings (URL,
// credentials, NKey, user and password, token, TLS, JetStream domain or
// API prefix), checked before any I/O, and the nats CLI's contexts (the
// JSON files of 'nats context save', and the one 'nats context select'
// chose) read into such a Config.
//
// A context field this package cannot honour (nsc, user_jwt, a SOCKS
// proxy, a Windows certificate store, a secret kept in 1Password or the
// environment, a field of a newer nats CLI) is refused with a
// *ContextError naming the file and the field, rather than ignored.
//
// Usage:
//
//	contexts, err := natsconn.NewContexts(natsconn.ContextConfig{}) // ~/.config/nats
//	if err != nil {
//		return err
//	}
//	c, err := contexts.Load("prod")
//	if err != nil {
//		return err // a *ContextError
//	}
//	cfg := c.Config()
//	cfg.Logger = log
//	nc, js, err := natsconn.Connect(ctx, cfg)
//	if err != nil {
//		return err
//	}
//	defer nc.Close()
//
// Resolve connects as the nats CLI does: a program's own settings, then
// the NATS_* variables, then the context ($NATS_CONTEXT, else the selected
// one), per group of settings:
//
//	cfg, origin, err := natsconn.Resolve(natsconn.Config{Logger: log}, natsconn.Sources{})
//
// Its refusals, and Check's, are a *ConfigError whose Reason names the
// settings in the caller's words (Sources.Names).
//
// Server URLs may carry a password; RedactURL hides it for messages.
package natsconn
