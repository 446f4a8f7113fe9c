/**
 * Whether containers can run here: for `describe.skipIf` in tests that need
 * them, so a machine without a container engine skips them, saying why.
 */
import { getContainerRuntimeClient, ImageName } from "testcontainers"

/**
 * Why containers cannot run here (`undefined` when they can): no container
 * engine reachable, or one of `images` (e.g. a locally built worker image,
 * which no registry serves) is not present. Images not listed are pulled as
 * usual when a container starts.
 */
export const unavailable = async (options: { readonly images?: ReadonlyArray<string> } = {}): Promise<string | undefined> => {
  let client: Awaited<ReturnType<typeof getContainerRuntimeClient>>
  try {
    client = await getContainerRuntimeClient()
  } catch (error) {
    return `no container engine reachable (${(error instanceof Error ? error.message : String(error)).split("\n")[0]})`
  }
  for (const image of options.images ?? []) {
    const present = await client.image.exists(ImageName.fromString(image)).catch(() => false)
    if (!present) return `image ${image} is not present (build it: npm run pack && docker build -f deploy/worker/Dockerfile -t ${image} .)`
  }
  return undefined
}
