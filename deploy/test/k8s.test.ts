// deploy/k8s: every manifest is valid against the Kubernetes API's schemas
// (strict: no unknown field), offline; and the pieces fit together — probes
// on the worker's HTTP port, a grace period that covers the shutdown
// timeout, selectors that select the worker pods, a ConfigMap of variables
// the worker reads, and a ctxd.yaml ConfigMap the worker's offline check accepts.
import { ConfigCheck } from "@ctxd/worker"
import { Effect } from "effect"
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { parseAllDocuments } from "yaml"
import { beforeAll, describe, expect, it } from "vitest"
import * as KubernetesSchemas from "./KubernetesSchemas.ts"

const ROOT = resolve(import.meta.dirname, "..", "..")
const K8S = join(ROOT, "deploy", "k8s")

interface Manifest {
  readonly file: string
  readonly object: { readonly apiVersion: string; readonly kind: string; readonly metadata: { readonly name: string } } & Record<
    string,
    unknown
  >
}

const manifests: ReadonlyArray<Manifest> = readdirSync(K8S)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort()
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(K8S, file), "utf8")).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`)
      return { file, object: doc.toJS() as Manifest["object"] }
    }),
  )

const KINDS = ["apps/v1 Deployment", "v1 Service", "v1 ConfigMap", "policy/v1 PodDisruptionBudget"]
const api = manifests.filter((m) => m.object.kind !== "Kustomization")
/** The one object of `kind` (the ConfigMaps: `ctxd-config`, the environment; `ctxd-config-file` is the config file's). */
const one = <A>(kind: string, name?: string): A => {
  const found = api.filter(
    (m) =>
      m.object.kind === kind &&
      (name !== undefined ? m.object.metadata.name === name : kind !== "ConfigMap" || m.object.metadata.name === "ctxd-config"),
  )
  expect(found, kind).toHaveLength(1)
  return found[0]!.object as A
}

interface Probe {
  readonly httpGet: { readonly path: string; readonly port: string | number }
}
interface Deployment {
  readonly metadata: { readonly name: string }
  readonly spec: {
    readonly replicas: number
    readonly selector: { readonly matchLabels: Record<string, string> }
    readonly strategy: { readonly rollingUpdate: { readonly maxUnavailable: number } }
    readonly template: {
      readonly metadata: { readonly labels: Record<string, string> }
      readonly spec: {
        readonly terminationGracePeriodSeconds: number
        readonly containers: ReadonlyArray<{
          readonly ports: ReadonlyArray<{ readonly name: string; readonly containerPort: number }>
          readonly livenessProbe: Probe
          readonly readinessProbe: Probe
          readonly startupProbe: Probe
          readonly envFrom: ReadonlyArray<{ readonly configMapRef?: { readonly name: string } }>
        }>
      }
    }
  }
}

describe("Kubernetes manifests (deploy/k8s)", () => {
  let validator: KubernetesSchemas.Validator
  beforeAll(() => {
    validator = KubernetesSchemas.make(KINDS)
  })

  it("are the objects a deployment needs: each kind once, two ConfigMaps (the environment, the config file)", () => {
    expect(api.map((m) => `${m.object.apiVersion} ${m.object.kind}`).sort()).toEqual([...KINDS, "v1 ConfigMap"].sort())
  })

  it.each(api.map((m) => [`${m.file}: ${m.object.kind} ${m.object.metadata.name}`, m] as const))(
    "%s is valid against the API schema",
    (_, m) => {
      expect(validator.validate(m.object)).toEqual([])
    },
  )

  it("the validator rejects what the API server would (it is not vacuous)", () => {
    const deployment = one<Deployment>("Deployment")
    const container = deployment.spec.template.spec.containers[0]!
    const broken = (patch: (copy: Record<string, unknown>) => void) => {
      const copy = structuredClone(deployment) as unknown as Record<string, unknown>
      patch(copy)
      return validator.validate(copy as unknown as Manifest["object"])
    }
    // a misspelt field
    expect(
      broken((d) => {
        const c = (d as unknown as Deployment).spec.template.spec.containers[0] as unknown as Record<string, unknown>
        c.readinesProbe = c.readinessProbe
      }),
    ).toContainEqual(expect.stringContaining("readinesProbe"))
    // a wrong type
    expect(broken((d) => ((d.spec as Record<string, unknown>).replicas = "two"))).toContainEqual(expect.stringContaining("/spec/replicas"))
    // a bad quantity
    expect(
      broken((d) => {
        const c = (d as unknown as Deployment).spec.template.spec.containers[0] as unknown as {
          resources: { limits: Record<string, string> }
        }
        c.resources.limits.memory = "1 gigabyte"
      }),
    ).not.toEqual([])
    expect(container.ports[0]!.containerPort).toBe(9464)
  })

  it("probes the worker's HTTP port: liveness /healthz, readiness /readyz", () => {
    const container = one<Deployment>("Deployment").spec.template.spec.containers[0]!
    const port = container.ports.find((p) => p.containerPort === 9464)
    expect(port).toBeDefined()
    const portOf = (probe: Probe) => (probe.httpGet.port === port!.name ? 9464 : probe.httpGet.port)
    expect([container.livenessProbe.httpGet.path, portOf(container.livenessProbe)]).toEqual(["/healthz", 9464])
    expect([container.readinessProbe.httpGet.path, portOf(container.readinessProbe)]).toEqual(["/readyz", 9464])
    expect(portOf(container.startupProbe)).toBe(9464)
  })

  it("gives a stopping worker its shutdown timeout plus a margin", () => {
    const source = readFileSync(join(ROOT, "services", "worker", "src", "WorkerConfig.ts"), "utf8")
    const byDefault = Number(/int\(\s*"CTXD_SHUTDOWN_TIMEOUT_MS",\s*([\d_]+)/.exec(source)?.[1]?.replaceAll("_", ""))
    expect(byDefault).toBeGreaterThan(0)
    const config = one<{ data: Record<string, string> }>("ConfigMap").data
    const shutdownMs = Number(config.CTXD_SHUTDOWN_TIMEOUT_MS ?? byDefault)
    expect(shutdownMs).toBe(byDefault)
    const grace = one<Deployment>("Deployment").spec.template.spec.terminationGracePeriodSeconds
    // in-flight turns, then the NATS drain (10 s), then a margin
    expect(grace).toBeGreaterThanOrEqual(shutdownMs / 1000 + 10 + 5)
  })

  it("selects the worker pods from the Deployment, the PodDisruptionBudget and the Service", () => {
    const deployment = one<Deployment>("Deployment")
    const podLabels = deployment.spec.template.metadata.labels
    const selects = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => podLabels[k] === v)
    expect(selects(deployment.spec.selector.matchLabels)).toBe(true)
    const pdb = one<{ spec: { selector: { matchLabels: Record<string, string> }; maxUnavailable?: number; minAvailable?: number } }>(
      "PodDisruptionBudget",
    )
    expect(selects(pdb.spec.selector.matchLabels)).toBe(true)
    // a drain never takes every worker, and the rollout never goes below the replicas
    expect(pdb.spec.maxUnavailable ?? deployment.spec.replicas - (pdb.spec.minAvailable ?? 0)).toBeLessThan(deployment.spec.replicas)
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0)
    const service = one<{
      metadata: { annotations: Record<string, string> }
      spec: { selector: Record<string, string>; ports: ReadonlyArray<{ port: number }> }
    }>("Service")
    expect(selects(service.spec.selector)).toBe(true)
    expect(service.spec.ports.map((p) => p.port)).toContain(9464)
    expect(service.metadata.annotations).toMatchObject({
      "prometheus.io/scrape": "true",
      "prometheus.io/port": "9464",
      "prometheus.io/path": "/metrics",
    })
  })

  it("configures the worker from the ConfigMap with variables it reads", () => {
    const deployment = one<Deployment>("Deployment")
    const configMap = one<{ metadata: { name: string }; data: Record<string, string> }>("ConfigMap")
    expect(deployment.spec.template.spec.containers[0]!.envFrom.map((e) => e.configMapRef?.name)).toContain(configMap.metadata.name)
    const operations = readFileSync(join(ROOT, "docs", "operations.md"), "utf8")
    const config = readFileSync(join(ROOT, "services", "worker", "src", "WorkerConfig.ts"), "utf8")
    for (const key of Object.keys(configMap.data)) {
      expect(operations.includes(`\`${key}\``) || config.includes(`"${key}"`), `${key} is a documented variable`).toBe(true)
    }
    expect(configMap.data.CTXD_HTTP_PORT).toBe("9464")
  })

  it("mounts ctxd.yaml from its ConfigMap where CTXD_CONFIG_FILE names it, and the file passes the offline check", async () => {
    const env = one<{ data: Record<string, string> }>("ConfigMap").data
    const file = one<{ metadata: { name: string }; data: Record<string, string> }>("ConfigMap", "ctxd-config-file")
    const spec = one<Deployment>("Deployment").spec.template.spec as unknown as {
      containers: ReadonlyArray<{ volumeMounts: ReadonlyArray<{ name: string; mountPath: string }> }>
      volumes: ReadonlyArray<{ name: string; configMap?: { name: string } }>
    }
    const volume = spec.volumes.find((v) => v.configMap?.name === file.metadata.name)!
    const mount = spec.containers[0]!.volumeMounts.find((m) => m.name === volume.name)!
    // a directory mount (no subPath): the kubelet's swap of an updated ConfigMap reaches the watcher
    expect(env.CTXD_CONFIG_FILE).toBe(`${mount.mountPath}/ctxd.yaml`)
    expect(Object.keys(file.data)).toEqual(["ctxd.yaml"])
    const dir = mkdtempSync(join(tmpdir(), "ctxd-k8s-config-"))
    writeFileSync(join(dir, "ctxd.yaml"), file.data["ctxd.yaml"]!)
    const checked = await Effect.runPromise(ConfigCheck.check(join(dir, "ctxd.yaml")))
    expect(checked.ok, checked.lines.join("\n")).toBe(true)
  })

  it("takes provider keys and the NATS login from optional Secrets, so a plain deployment needs neither", () => {
    const spec = one<Deployment>("Deployment").spec.template.spec as unknown as {
      containers: ReadonlyArray<{
        envFrom: ReadonlyArray<{ secretRef?: { name: string; optional?: boolean } }>
        volumeMounts: ReadonlyArray<{ name: string; mountPath: string; readOnly?: boolean }>
      }>
      volumes: ReadonlyArray<{ name: string; secret?: { secretName: string; optional?: boolean } }>
    }
    const container = spec.containers[0]!
    expect(container.envFrom.find((e) => e.secretRef !== undefined)?.secretRef).toEqual({ name: "ctxd-providers", optional: true })
    const volume = spec.volumes.find((v) => v.secret !== undefined)!
    expect(volume.secret).toEqual({ secretName: "ctxd-nats", optional: true })
    expect(container.volumeMounts.find((m) => m.name === volume.name)).toEqual({
      name: volume.name,
      mountPath: "/etc/ctxd/nats",
      readOnly: true,
    })
    // the ConfigMap's secure block names files under that mount
    const text = readFileSync(join(ROOT, "deploy", "k8s", "configmap.yaml"), "utf8")
    expect(text).toMatch(/#\s+NATS_CREDS: "\/etc\/ctxd\/nats\/ctxd\.creds"/)
  })

  it("lists every manifest in the kustomization", () => {
    const kustomization = manifests.find((m) => m.object.kind === "Kustomization")!.object as unknown as { resources: Array<string> }
    expect([...kustomization.resources].sort()).toEqual([...new Set(api.map((m) => m.file))].sort())
  })
})
