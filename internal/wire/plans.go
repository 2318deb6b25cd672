package wire

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// This file is the edge between the plan model and its proto mirror. The
// two must stay lossless: PlanFromProto(Plan(p, d)) digests as p.

var (
	kindToProto = map[plan.Kind]tollgatev1.StepKind{
		plan.KindTool: tollgatev1.StepKind_STEP_KIND_TOOL, plan.KindProse: tollgatev1.StepKind_STEP_KIND_PROSE, plan.KindJoin: tollgatev1.StepKind_STEP_KIND_JOIN,
	}
	onFailToProto = map[plan.OnFail]tollgatev1.OnFail{
		plan.OnFailSkip: tollgatev1.OnFail_ON_FAIL_SKIP, plan.OnFailStop: tollgatev1.OnFail_ON_FAIL_STOP,
	}
	stopToProto = map[plan.StopType]tollgatev1.StoppingPointType{
		plan.StopMenu: tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_MENU, plan.StopChoice: tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_CHOICE, plan.StopText: tollgatev1.StoppingPointType_STOPPING_POINT_TYPE_TEXT,
	}
	expiryToProto = map[string]tollgatev1.OnExpiry{
		"reject": tollgatev1.OnExpiry_ON_EXPIRY_REJECT, "cancel": tollgatev1.OnExpiry_ON_EXPIRY_CANCEL, "escalate": tollgatev1.OnExpiry_ON_EXPIRY_ESCALATE,
	}
)

var (
	kindFromProto   = invert(kindToProto)
	onFailFromProto = invert(onFailToProto)
	stopFromProto   = invert(stopToProto)
	expiryFromProto = invert(expiryToProto)
)

func durToProto(s string) *durationpb.Duration {
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil
	}
	return durationpb.New(d)
}

func durFromProto(d *durationpb.Duration) string {
	if d == nil {
		return ""
	}
	return plan.FormatDuration(d.AsDuration())
}

func objectString(o plan.Object) string {
	if len(o) == 0 {
		return ""
	}
	b, err := o.MarshalJSON()
	if err != nil {
		return string(o)
	}
	return string(b)
}

// Plan is p as the API shows it, under digest (the caller's digest of p:
// plans are digested once, when compiled or stored).
func Plan(p *plan.Plan, digest string) *tollgatev1.Plan {
	out := &tollgatev1.Plan{Name: p.Name, Description: p.Description, Digest: digest,
		InitialSteps: stepsToProto(p.InitialSteps), StoppingPoints: stopsToProto(p.StoppingPoints), Inputs: p.Inputs}
	for _, n := range p.Notes {
		out.Notes = append(out.Notes, &tollgatev1.Note{Code: n.Code, Message: n.Message, StepId: n.Step})
	}
	return out
}

func stepsToProto(steps []plan.Step) []*tollgatev1.Step {
	out := make([]*tollgatev1.Step, 0, len(steps))
	for _, s := range steps {
		out = append(out, &tollgatev1.Step{
			Id: s.ID, Kind: kindToProto[s.Kind], Server: s.Server, Tool: s.Tool, ArgsJson: objectString(s.Args),
			Prompt: s.Prompt, ParallelGroup: s.ParallelGroup, OnFail: onFailToProto[s.OnFail], SideEffect: s.SideEffect,
			Idempotent: s.Idempotent, DependsOn: s.DependsOn, In: s.In, MinSuccess: int32(s.MinSuccess),
			WithoutAsking: s.WithoutAsking, Retry: int32(s.Retry), Timeout: durToProto(s.Timeout), Placement: s.On,
		})
	}
	return out
}

func stopsToProto(stops []plan.StoppingPoint) []*tollgatev1.StoppingPoint {
	out := make([]*tollgatev1.StoppingPoint, 0, len(stops))
	for _, sp := range stops {
		ps := &tollgatev1.StoppingPoint{
			Id: sp.ID, Type: stopToProto[sp.Type], Title: sp.Title, Audience: sp.Audience, Added: sp.Added,
			Reason: sp.Reason, After: sp.After, Summary: sp.Summary, Show: sp.Show, Expires: durToProto(sp.Expires),
			OnExpiry: expiryToProto[sp.OnExpiry], RemindAfter: durToProto(sp.RemindAfter),
			EscalateAfter: durToProto(sp.EscalateAfter), EscalateTo: sp.EscalateTo, Approvers: sp.Approvers,
			Quorum: int32(sp.Quorum),
		}
		if c := sp.Check; c != nil {
			ps.Check = &tollgatev1.Check{Id: c.ID, Server: c.Server, Tool: c.Tool, ArgsJson: objectString(c.Args), Fields: c.Fields}
		}
		for _, a := range sp.Amend {
			ps.Amend = append(ps.Amend, &tollgatev1.AmendBound{Field: a.Field, Min: a.Min, Max: a.Max})
		}
		for _, o := range sp.Options {
			po := &tollgatev1.Option{Id: o.ID, Label: o.Label}
			if sp.Type == plan.StopMenu {
				po.Steps, po.StoppingPoints = stepsToProto(o.Steps), stopsToProto(o.StoppingPoints)
			}
			ps.Options = append(ps.Options, po)
		}
		if sp.Then != nil {
			ps.Then = &tollgatev1.Phase{Steps: stepsToProto(sp.Then.Steps), StoppingPoints: stopsToProto(sp.Then.StoppingPoints)}
		}
		out = append(out, ps)
	}
	return out
}

// PlanFromProto converts a proto plan to the domain model. It checks enum
// values; the caller runs plan.Verify before trusting the result.
func PlanFromProto(p *tollgatev1.Plan) (*plan.Plan, error) {
	if p == nil {
		return nil, fmt.Errorf("no plan")
	}
	steps, err := stepsFromProto(p.GetInitialSteps())
	if err != nil {
		return nil, err
	}
	stops, err := stopsFromProto(p.GetStoppingPoints())
	if err != nil {
		return nil, err
	}
	out := &plan.Plan{Name: p.GetName(), Description: p.GetDescription(), InitialSteps: steps, StoppingPoints: stops, Notes: []plan.Note{},
		Inputs: p.GetInputs()}
	for _, n := range p.GetNotes() {
		out.Notes = append(out.Notes, plan.Note{Code: n.GetCode(), Message: n.GetMessage(), Step: n.GetStepId()})
	}
	return out, nil
}

func stepsFromProto(in []*tollgatev1.Step) ([]plan.Step, error) {
	out := make([]plan.Step, 0, len(in))
	for _, s := range in {
		kind, ok := kindFromProto[s.GetKind()]
		if !ok {
			return nil, fmt.Errorf("step %q: kind %v is not valid", s.GetId(), s.GetKind())
		}
		st := plan.Step{
			ID: s.GetId(), Kind: kind, Server: s.GetServer(), Tool: s.GetTool(), Prompt: s.GetPrompt(),
			ParallelGroup: s.GetParallelGroup(), OnFail: onFailFromProto[s.GetOnFail()], SideEffect: s.GetSideEffect(),
			Idempotent: s.GetIdempotent(), DependsOn: s.GetDependsOn(), In: s.GetIn(), MinSuccess: int(s.GetMinSuccess()),
			WithoutAsking: s.GetWithoutAsking(), Retry: int(s.GetRetry()), Timeout: durFromProto(s.GetTimeout()), On: s.GetPlacement(),
		}
		if a := s.GetArgsJson(); a != "" {
			st.Args = plan.Object(a)
		}
		out = append(out, st)
	}
	return out, nil
}

func stopsFromProto(in []*tollgatev1.StoppingPoint) ([]plan.StoppingPoint, error) {
	out := make([]plan.StoppingPoint, 0, len(in))
	for _, ps := range in {
		typ, ok := stopFromProto[ps.GetType()]
		if !ok {
			return nil, fmt.Errorf("stopping point %q: type %v is not valid", ps.GetId(), ps.GetType())
		}
		sp := plan.StoppingPoint{
			ID: ps.GetId(), Type: typ, Title: ps.GetTitle(), Audience: ps.GetAudience(), Added: ps.GetAdded(),
			Reason: ps.GetReason(), After: ps.GetAfter(), Summary: ps.GetSummary(), Show: ps.GetShow(),
			Expires: durFromProto(ps.GetExpires()), OnExpiry: expiryFromProto[ps.GetOnExpiry()],
			RemindAfter: durFromProto(ps.GetRemindAfter()), EscalateAfter: durFromProto(ps.GetEscalateAfter()),
			EscalateTo: ps.GetEscalateTo(), Approvers: ps.GetApprovers(), Quorum: int(ps.GetQuorum()),
			Options: []plan.Option{},
		}
		if sp.After == nil {
			sp.After = []string{}
		}
		if c := ps.GetCheck(); c != nil {
			sp.Check = &plan.Check{ID: c.GetId(), Server: c.GetServer(), Tool: c.GetTool(), Args: plan.Object(c.GetArgsJson()), Fields: c.GetFields()}
		}
		for _, a := range ps.GetAmend() {
			sp.Amend = append(sp.Amend, plan.AmendBound{Field: a.GetField(), Min: a.GetMin(), Max: a.GetMax()})
		}
		for _, o := range ps.GetOptions() {
			opt := plan.Option{ID: o.GetId(), Label: o.GetLabel()}
			if typ == plan.StopMenu {
				var err error
				if opt.Steps, err = stepsFromProto(o.GetSteps()); err != nil {
					return nil, err
				}
				if opt.StoppingPoints, err = stopsFromProto(o.GetStoppingPoints()); err != nil {
					return nil, err
				}
			}
			sp.Options = append(sp.Options, opt)
		}
		if th := ps.GetThen(); th != nil {
			steps, err := stepsFromProto(th.GetSteps())
			if err != nil {
				return nil, err
			}
			stops, err := stopsFromProto(th.GetStoppingPoints())
			if err != nil {
				return nil, err
			}
			sp.Then = &plan.Phase{Steps: steps, StoppingPoints: stops}
		}
		out = append(out, sp)
	}
	return out, nil
}

// OnExpiry is a stopping point's or an ask's on expiry as the plan names
// it ("" for the default, "reject", "cancel", "escalate"), for
// plan.ExpiryOutcome.
func OnExpiry(e tollgatev1.OnExpiry) string { return expiryFromProto[e] }
