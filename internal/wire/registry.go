package wire

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/store"
)

// Skill is a skill version as the API shows it.
func Skill(v store.SkillVersion) *tollgatev1.Skill {
	return &tollgatev1.Skill{Name: v.Name, Version: v.Version, Description: v.Description, Source: v.Source, PlanDigest: v.PlanDigest,
		Author: v.Author, PublishedAt: timestamppb.New(v.At), Deleted: v.Deleted, Origin: v.Origin}
}
