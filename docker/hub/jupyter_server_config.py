# The student image's JupyterLab settings, for its single-user server on the class server (docker/hub/Dockerfile).
# Under JupyterHub the image's CMD, which carries them as flags, does not run (jupyterhub-singleuser does), so
# they live here. The students' work is their home, the volume docker/hub mounts: /course (the image's copy)
# stays out of sight, and the handouts come from nbgitpuller into ~/handouts.
c = get_config()  # noqa: F821 (Jupyter's config loader defines it)
c.ServerApp.root_dir = "/home/student"
c.LabApp.extension_manager = "readonly"          # the container has no business installing extensions
c.LabApp.app_settings_dir = "/course/docker/jupyter"   # overrides.json: no news pop-up, no update check
c.LabApp.news_url = None
