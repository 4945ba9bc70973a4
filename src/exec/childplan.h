/*
 * Child plans of scoot's custom nodes (custom_plans / custom_ps): what PostgreSQL does for a
 * node's lefttree and righttree but not for a custom scan's own children.
 */
#ifndef SCOOT_CHILDPLAN_H
#define SCOOT_CHILDPLAN_H

#include "executor/executor.h"

/*
 * Rescans `child` of `parent`: the parameters that changed for the parent changed for the child
 * too (else a Memoize or a hash join's table below keeps rows of the old values), and a child
 * with changed parameters rescans itself on its next ExecProcNode, as PostgreSQL's Append does.
 */
static inline void
scoot_rescan_child(PlanState *parent, PlanState *child)
{
	if (parent->chgParam != NULL)
		UpdateChangedParamSet(child, parent->chgParam);
	if (child->chgParam == NULL)
		ExecReScan(child);
}

#endif
