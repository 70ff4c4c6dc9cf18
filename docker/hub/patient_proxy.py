"""The class server's proxy: JupyterHub's configurable-http-proxy, given as long as a busy machine needs to answer.

JupyterHub 6.1.1 starts configurable-http-proxy (a node process) and waits for its two ports with a limit written
into ``ConfigurableHTTPProxy.start`` (10 s a port, 15 s in all; no setting changes it). On a loaded machine, a hub
restarted while a class's kernels run, node took longer than that (CI at a load of 5 to 6: ``Failed to start
proxy ... TimeoutError: Server at 127.0.0.1:8001 didn't respond in 10 seconds``), and the hub exited with a
proxy that was about to answer. :class:`PatientProxy` keeps JupyterHub's start and, when only its wait ran out
while the proxy still runs, goes on waiting up to :attr:`PatientProxy.start_timeout` seconds in all; a proxy that
exits, or does not answer by then, still fails the start, saying which port did not answer and what to do.

``docker/hub/jupyterhub_config.py`` makes it the hub's proxy (``c.JupyterHub.proxy_class``);
``tests/test_hub_start.py`` starts a real JupyterHub with a proxy slower than JupyterHub's own limit.
"""
from __future__ import annotations

import asyncio
import time

from jupyterhub.objects import Server
from jupyterhub.proxy import ConfigurableHTTPProxy
from jupyterhub.utils import AnyTimeoutError
from tornado.ioloop import PeriodicCallback
from traitlets import Integer


class PatientProxy(ConfigurableHTTPProxy):
    """configurable-http-proxy, waited for up to :attr:`start_timeout` seconds (JupyterHub waits 15)."""

    start_timeout = Integer(
        300,
        help="""Seconds from launching configurable-http-proxy until both its ports (the public one and its API)
        must answer. JupyterHub's own wait is 15 s; a loaded machine needs longer.""",
    ).tag(config=True)

    async def start(self):
        started = time.monotonic()
        try:
            await super().start()
            return
        except AnyTimeoutError as exc:
            process = self.proxy_process
            if process is None or process.poll() is not None:
                raise
            self.log.warning("The proxy (pid %s) did not answer within JupyterHub's own wait (%s); waiting for it "
                             "up to %d s in all (PatientProxy.start_timeout)", process.pid, exc, self.start_timeout)
        for name, url in (("its public port", self.public_url), ("its API", self.api_url)):
            await self._wait_for(name, Server.from_url(url), started)
        self.log.info("The proxy answered after %.1f s", time.monotonic() - started)
        callback = PeriodicCallback(self.check_running, 1e3 * self.check_running_interval)
        self._check_running_callback = callback
        callback.start()

    async def _wait_for(self, name: str, server: Server, started: float) -> None:
        """Wait until ``server`` accepts connections; fail if the proxy exits or :attr:`start_timeout` passes."""
        while True:
            status = self.proxy_process.poll()
            if status is not None:
                raise RuntimeError(f"the proxy (configurable-http-proxy) exited with status {status} before "
                                   f"{name} ({server.bind_url}) answered: see its lines above")
            left = self.start_timeout - (time.monotonic() - started)
            if left <= 0:
                raise TimeoutError(
                    f"the proxy (configurable-http-proxy, pid {self.proxy_process.pid}) runs but {name} "
                    f"({server.bind_url}) did not answer within {self.start_timeout} s of its start: the machine is "
                    "too busy, or the port is taken by another process. Raise COURSE_HUB_START_TIMEOUT, or start the "
                    "hub again when the load is lower")
            try:
                await server.wait_up(timeout=min(5, max(left, 0.5)))
                return
            except AnyTimeoutError:
                await asyncio.sleep(0)
