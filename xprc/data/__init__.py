"""Scene data: datasets, scene files, workloads and the demo scene.

- `ply`:        3DGS PLYs and point-cloud PLYs
- `datasets`:   `View`, `Dataset` and the Blender / COLMAP loaders (`load_scene`)
- `colmap`:     the COLMAP model reader (binary and text)
- `workloads`:  the garden test scene and small random scenes
- `demo_scene`: the bundled demo scene (ray traced, NeRF-synthetic format)
"""
