-- Argo CD health check for apps.sidecarset.io/SidecarSet. Its source is the operator's
-- config/argocd/health.lua; `make argocd` writes it into argocd-cm.yaml and
-- argo-cd-values.yaml there.
--
-- It reads what the operator writes and what kstatus (Flux) reads, in kstatus's order, so
-- that both tools agree (docs/gitops.md): status.observedGeneration, then the conditions
-- Stalled, Reconciling and Ready. Suspended is Argo CD's own: a set paused by its spec
-- (Ready's reason InjectionPaused or RollingUpdatePaused), which kstatus cannot say.
-- Only Lua's base library is used: Argo CD runs custom checks without string or math.

local function condition(conditions, name)
  for _, c in ipairs(conditions) do
    if c.type == name then
      return c
    end
  end
  return nil
end

local function isTrue(c)
  return c ~= nil and c.status == "True"
end

local function health()
  local status = obj.status
  if status == nil or status.observedGeneration == nil then
    return "Progressing", "Waiting for the operator to write the SidecarSet's status"
  end
  local generation = obj.metadata.generation
  if generation ~= nil and status.observedGeneration ~= generation then
    return "Progressing", "Waiting for the operator to observe generation " .. tostring(generation) ..
      " (the status describes generation " .. tostring(status.observedGeneration) .. ")"
  end
  local conditions = status.conditions or {}
  local stalled = condition(conditions, "Stalled")
  if isTrue(stalled) then
    return "Degraded", stalled.message
  end
  local reconciling = condition(conditions, "Reconciling")
  if isTrue(reconciling) then
    return "Progressing", reconciling.message
  end
  local ready = condition(conditions, "Ready")
  if ready == nil then
    return "Progressing", "Waiting for the operator to write the Ready condition"
  end
  if ready.reason == "InjectionPaused" or ready.reason == "RollingUpdatePaused" then
    return "Suspended", ready.message
  end
  if ready.status == "True" then
    return "Healthy", ready.message
  end
  -- A reason this check does not know (an operator older than the Stalled and Reconciling
  -- conditions): kstatus says InProgress too.
  return "Progressing", ready.message
end

local hs = {}
hs.status, hs.message = health()
return hs
