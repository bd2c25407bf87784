// Evaluates ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) and their bindings against
// admission requests the way kube-apiserver does, with a real CEL implementation (@bufbuild/cel).
//   node vap.mjs INPUT.json
// INPUT: {"objects": [rendered manifests], "cases": [{"name", "request", "object", "oldObject",
// "namespaceObject", "expect": "allowed" | "denied" | "not-matched", "message": substring of a denial}]}.
// Or {"objects", "webhookCases": [{"name", "request", "object", "oldObject", "expect": "sent" | "not-sent" |
// "rejected"}]}: whether the rendered ValidatingWebhookConfigurations' webhooks are sent the request.
// Prints one line a case and exits 1 when any case comes out otherwise than expected, 2 when the input uses
// what this harness does not model (it then refuses rather than guess).
//
// What the API server does, and so this harness:
// - Variables bound for every expression: object (null for DELETE), oldObject (null for CREATE), request
//   (the AdmissionRequest as JSON: empty fields left out, so reading one without has() is an error),
//   params (null: no paramKind), namespaceObject (the request's Namespace; null for cluster-scoped
//   objects), authorizer (not modeled: an expression that names it is refused); variables only in
//   validations and messageExpressions, each variable seeing the ones before it.
// - matchConstraints.resourceRules pick the requests by group, version, resource[/subresource] and
//   operation (a PATCH is admitted as an UPDATE, a DELETE carries the stored object as oldObject).
// - matchConditions, in order: any false and the policy is skipped ("not matched"); all true and it is
//   evaluated; otherwise (an error, none false) failurePolicy decides: Fail rejects, Ignore skips.
// - validations: all must be true. A false one denies with messageExpression's value, else message, else
//   the expression; an error is failurePolicy's again. A variable that failed is an error only where used.
// - The binding's validationActions: Deny rejects; Warn and Audit let the request through.
import { isCelError, parse, run } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { readFileSync } from "node:fs";

class Unmodeled extends Error {}

// JSON as CEL sees Kubernetes objects: objects as maps, integers as int (not double).
function cel(v) {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v.map(cel);
  if (typeof v === "object") return new Map(Object.entries(v).map(([k, x]) => [k, cel(x)]));
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  return v;
}

function evaluate(expr, bindings) {
  if (/\bauthorizer\b/.test(expr)) throw new Unmodeled(`authorizer is not modeled: ${expr}`);
  return run(expr, bindings, { funcs: strings });
}

const has = (list, v) => (list || []).includes(v) || (list || []).includes("*");

function ruleMatches(rule, req) {
  const res = req.resource;
  const name = req.subResource ? `${res.resource}/${req.subResource}` : res.resource;
  const resources = rule.resources || [];
  const resourceOk = resources.includes(name) || resources.includes("*") ||
    (!req.subResource && resources.includes(`${res.resource}/*`)) ||
    (req.subResource && resources.includes(`*/${req.subResource}`)) || resources.includes("*/*");
  return has(rule.apiGroups, res.group) && has(rule.apiVersions, res.version) &&
    has(rule.operations, req.operation) && resourceOk;
}

function checkModeled(policy, binding) {
  const spec = policy.spec, mc = spec.matchConstraints || {};
  for (const [what, v] of [["paramKind", spec.paramKind], ["namespaceSelector", mc.namespaceSelector],
    ["objectSelector", mc.objectSelector], ["excludeResourceRules", mc.excludeResourceRules],
    ["binding matchResources", binding.spec.matchResources], ["binding paramRef", binding.spec.paramRef]]) {
    if (v && Object.keys(v).length) throw new Unmodeled(`${policy.metadata.name}: ${what} is not modeled`);
  }
  for (const e of [...(spec.matchConditions || []), ...(spec.variables || []), ...(spec.validations || [])]) {
    parse(e.expression); // a policy whose CEL does not compile is refused by the API server
    if (e.messageExpression) parse(e.messageExpression);
  }
}

// One policy through one binding: {matched, denied, messages}.
function admitOne(policy, binding, c) {
  const spec = policy.spec, req = c.request;
  const failClosed = (spec.failurePolicy || "Fail") === "Fail";
  const base = {
    object: cel(c.object ?? null), oldObject: cel(c.oldObject ?? null), request: cel(req),
    params: null, namespaceObject: cel(c.namespaceObject ?? null),
  };
  if (!(spec.matchConstraints?.resourceRules || []).some((r) => ruleMatches(r, req)))
    return { matched: false, denied: false, messages: [] };

  let errored = null;
  for (const m of spec.matchConditions || []) {
    const r = evaluate(m.expression, base);
    if (r === false) return { matched: false, denied: false, messages: [] };
    if (r !== true) errored = `match condition ${m.name}: ${isCelError(r) ? r.message : `not a bool: ${r}`}`;
  }
  if (errored) return { matched: true, denied: failClosed, messages: [errored] };

  const vars = new Map();
  for (const v of spec.variables || []) {
    const r = evaluate(v.expression, { ...base, variables: vars });
    if (!isCelError(r)) vars.set(v.name, r);
  }
  const bindings = { ...base, variables: vars };
  const messages = [];
  let denied = false;
  for (const v of spec.validations || []) {
    const r = evaluate(v.expression, bindings);
    if (r === true) continue;
    if (r !== false) {
      messages.push(`expression error: ${isCelError(r) ? r.message : `not a bool: ${r}`}`);
      denied ||= failClosed;
      continue;
    }
    let msg = v.message || `failed expression: ${v.expression}`;
    if (v.messageExpression) {
      const m = evaluate(v.messageExpression, bindings);
      if (typeof m === "string" && m !== "") msg = m;
    }
    messages.push(msg);
    denied = true;
  }
  const actions = binding.spec.validationActions || [];
  return { matched: true, denied: denied && actions.includes("Deny"), messages };
}

function admit(objects, c) {
  const policies = new Map(objects.filter((o) => o.kind === "ValidatingAdmissionPolicy")
    .map((p) => [p.metadata.name, p]));
  const out = { matched: false, denied: false, messages: [] };
  for (const b of objects.filter((o) => o.kind === "ValidatingAdmissionPolicyBinding")) {
    const p = policies.get(b.spec.policyName);
    if (!p) throw new Unmodeled(`binding ${b.metadata.name} names no rendered policy`);
    checkModeled(p, b);
    const r = admitOne(p, b, c);
    out.matched ||= r.matched;
    out.denied ||= r.denied;
    out.messages.push(...r.messages);
  }
  return out;
}

// Whether the API server sends a request to a webhook of a ValidatingWebhookConfiguration: its rules
// match and every matchCondition is true ("sent"); one false: "not-sent"; an error and none false: with
// failurePolicy Fail the request is rejected ("rejected"), with Ignore the webhook is skipped ("not-sent").
// Selectors are not modeled (refused).
function sendsTo(webhook, c) {
  for (const [what, v] of [["namespaceSelector", webhook.namespaceSelector], ["objectSelector", webhook.objectSelector]])
    if (v && Object.keys(v).length) throw new Unmodeled(`${webhook.name}: ${what} is not modeled`);
  if (!(webhook.rules || []).some((r) => ruleMatches(r, c.request))) return "not-sent";
  const base = { object: cel(c.object ?? null), oldObject: cel(c.oldObject ?? null), request: cel(c.request) };
  let errored = false;
  for (const m of webhook.matchConditions || []) {
    parse(m.expression);
    const r = evaluate(m.expression, base);
    if (r === false) return "not-sent";
    if (r !== true) errored = true;
  }
  if (errored) return (webhook.failurePolicy || "Fail") === "Fail" ? "rejected" : "not-sent";
  return "sent";
}

const input = JSON.parse(readFileSync(process.argv[2], "utf8"));
let bad = 0;
try {
  const webhooks = input.objects.filter((o) => o.kind === "ValidatingWebhookConfiguration")
    .flatMap((o) => o.webhooks || []);
  for (const c of input.webhookCases || []) {
    if (!webhooks.length) throw new Unmodeled("no ValidatingWebhookConfiguration among the objects");
    const got = webhooks.map((w) => `${w.name}: ${sendsTo(w, c)}`);
    const ok = webhooks.every((w) => sendsTo(w, c) === c.expect);
    if (!ok) bad++;
    console.log(`${ok ? "ok  " : "FAIL"} ${c.name}: ${got.join(", ")}${ok ? "" : ` -- expected ${c.expect}`}`);
  }
  if (!input.cases?.length) {
    if (bad) process.exit(1);
    process.exit(0);
  }
  if (!input.objects.some((o) => o.kind === "ValidatingAdmissionPolicyBinding"))
    throw new Unmodeled("no ValidatingAdmissionPolicyBinding among the objects");
  for (const c of input.cases) {
    const r = admit(input.objects, c);
    const got = !r.matched ? "not-matched" : r.denied ? "denied" : "allowed";
    const msgOk = !c.message || r.messages.some((m) => m.includes(c.message));
    const ok = got === c.expect && msgOk;
    if (!ok) bad++;
    console.log(`${ok ? "ok  " : "FAIL"} ${c.name}: ${got}${r.messages.length ? ` (${r.messages.join("; ")})` : ""}` +
      (ok ? "" : ` -- expected ${c.expect}${c.message ? ` with "${c.message}"` : ""}`));
  }
} catch (e) {
  if (e instanceof Unmodeled) {
    console.log(`refused: ${e.message}`);
    process.exit(2);
  }
  throw e;
}
process.exit(bad ? 1 : 0);
