// Package model is the quota model without the engine: the client quota
// keys, entities and their precedence levels, entity options, Kafka's
// user-name sanitising, and the quota entries of a file with the one parser
// and validator every source of a quota uses (the config file, `tollgate
// quotas apply`, the Kafka API's DescribeClientQuotas and
// AlterClientQuotas), with Kafka's messages. Package quota (the engine)
// builds on it; the control plane, the admin HTTP API and the CLI import it
// alone. It imports nothing of the project.
package model
