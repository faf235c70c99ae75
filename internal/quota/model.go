package quota

import "github.com/tollgate/tollgate/internal/quota/model"

// The quota model (keys, entities, levels, options, sanitising, the file
// entries and their parser) is package model's, which the control plane
// and the CLI use without the engine; these names keep the engine's code
// and its users reading as before.
type (
	Key         = model.Key
	Name        = model.Name
	Entity      = model.Entity
	Level       = model.Level
	Options     = model.Options
	ShadowStats = model.ShadowStats
	FileEntry   = model.FileEntry
	Quotas      = model.Quotas
	Resolution  = model.Resolution
	// tags name a bucket (model.Tags): its key in a manager's bucket map.
	tags = model.Tags
)

// The client quota keys (model's).
const (
	ProducerByteRate       = model.ProducerByteRate
	ConsumerByteRate       = model.ConsumerByteRate
	RequestPercentage      = model.RequestPercentage
	ControllerMutationRate = model.ControllerMutationRate
	numKeys                = model.NumKeys
)

// The levels (model's).
const (
	LevelNone                     = model.LevelNone
	LevelUserClient               = model.LevelUserClient
	LevelUserDefaultClient        = model.LevelUserDefaultClient
	LevelUser                     = model.LevelUser
	LevelDefaultUserClient        = model.LevelDefaultUserClient
	LevelDefaultUserDefaultClient = model.LevelDefaultUserDefaultClient
	LevelDefaultUser              = model.LevelDefaultUser
	LevelClient                   = model.LevelClient
	LevelClientPrefix             = model.LevelClientPrefix
	LevelDefaultClient            = model.LevelDefaultClient
	LevelUserTopic                = model.LevelUserTopic
	LevelDefaultUserTopic         = model.LevelDefaultUserTopic
	LevelClientPrefixTopic        = model.LevelClientPrefixTopic
	LevelTopic                    = model.LevelTopic
)

// Unlimited is the bound of a bucket no quota applies to (model's).
const Unlimited = model.Unlimited

// MaxBurstSeconds bounds Options.Burst (model's).
const MaxBurstSeconds = model.MaxBurstSeconds

// The model's constructors and helpers.
var (
	Keys               = model.Keys
	ParseKey           = model.ParseKey
	Exact              = model.Exact
	Default            = model.Default
	Prefix             = model.Prefix
	TopicEntity        = model.TopicEntity
	UserEntity         = model.UserEntity
	ClientEntity       = model.ClientEntity
	UserClientEntity   = model.UserClientEntity
	ClientPrefixEntity = model.ClientPrefixEntity
	Sanitize           = model.Sanitize
	Desanitize         = model.Desanitize
)
