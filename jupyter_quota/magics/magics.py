"""``%quota`` and ``%swift_sft``: a team's balance, and quota-fitted ``swift sft`` jobs, from a notebook.

``%load_ext jupyter_quota`` registers :class:`QuotaMagics`. Everything goes through the REST API
of the Jupyter server that started the kernel (:mod:`.client`), so the server decides who the
user is and what their team may use. Problems reach the user as one ``UsageError`` line, never
a traceback. Defaults can be set with ``%config QuotaMagics.namespace = "team-alpha"``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shlex

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Float, Unicode

from .. import priority
from ..errors import QuotaError
from ..increasewords import parse_words
from ..swift import check_with_ms_swift, parse_sft_args
from .client import QuotaClientError, connect
from .display import command_line, in_kernel, increases_text, show_balance, show_plan
from .follow import Job

#: the magic's own options (everything else on the line goes to ``swift sft``)
VALUE_OPTIONS = {"namespace": "--namespace", "gpus": "--gpus", "name": "--name", "priority": "--priority"}
FLAG_OPTIONS = {"dry-run": "--dry-run", "as-is": "--as-is", "best-effort": "--best-effort"}
#: ``%swift_deploy``'s own options (everything else goes to ``swift deploy``)
DEPLOY_FLAG_OPTIONS = {"dry-run": "--dry-run", "best-effort": "--best-effort", "no-wait": "--no-wait"}
DEPLOY_VALUE_OPTIONS = {**VALUE_OPTIONS, "job": "--job"}


@magics_class
class QuotaMagics(Magics):
    """Quota-aware magics; created by ``%load_ext jupyter_quota``."""

    namespace = Unicode(
        "",
        help="Namespace %swift_sft and %quota use when none is named. Default: empty (the "
        "user's only namespace; with several, they are asked to choose).",
    ).tag(config=True)

    poll_interval = Float(
        2.0, help="Seconds between two refreshes of a followed job's status and log. Default: 2."
    ).tag(config=True)

    check_argv = Bool(
        True,
        help="Let the installed ms-swift's own parser check the final swift sft arguments "
        "before submitting (skipped where ms-swift is not installed). Default: true.",
    ).tag(config=True)

    def __init__(self, shell=None, connect_fn=connect, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self._connect = connect_fn
        self._client = None
        #: the last job %swift_sft submitted (also its return value)
        self.last_job: Job | None = None

    # -- %quota --------------------------------------------------------------------------------
    @magic_arguments()
    @argument(
        "namespace", nargs="?", default=None, help="The namespace to show; default: every namespace you belong to."
    )
    @line_magic
    def quota(self, line: str):
        """Show what is left of your team's quota: used, hard and remaining per resource.

        Bars in JupyterLab, a table in static renderers, text in a terminal IPython.
        ``%quota request [--namespace NS] +2 gpu 8h "reason"`` asks an admin for a temporary
        increase (``%quota requests`` lists your teams' requests).
        """
        words = _shell_split(line)
        if words[:1] == ["request"]:
            return self._request_increase(words[1:])
        if words[:1] == ["requests"]:
            with _friendly_errors():
                print(increases_text(self.client().increases()))
            return None
        args = parse_argstring(self.quota, line)
        with _friendly_errors():
            client = self.client()
            namespace = args.namespace or self.namespace
            if namespace:
                show_balance(client.balance(namespace))
                return None
            namespaces = client.namespaces()
            if not namespaces:
                raise UsageError(_no_namespace(client))
            for item in namespaces:
                show_balance(item["balance"])
        return None

    def _request_increase(self, words: list[str]) -> dict:
        requested = None
        if words[:1] in (["--namespace"], ["-n"]) and len(words) > 1:
            requested, words = words[1], words[2:]
        with _friendly_errors():
            client = self.client()
            namespace = self.choose_namespace(client, requested)
            balance = client.balance(namespace)
            gpu = next((n.get("gpuResource") for n in client.namespaces() if n["name"] == namespace), None)
            body = parse_words(words, set(balance.get("resources") or {}), gpu or "nvidia.com/gpu")
            made = client.request_increase(namespace, body)
        print(increases_text([made]))
        print("An admin approves or denies it in the quota admin view; %quota requests shows where it stands.")
        return made

    # -- %swift_sft ------------------------------------------------------------------------------
    @magic_arguments()
    @argument(
        "--namespace",
        default=None,
        metavar="NS",
        help="The team namespace to run in; default: your only namespace (with several, "
        "%%swift_sft lists them and asks you to choose).",
    )
    @argument(
        "--gpus",
        type=int,
        default=None,
        metavar="N",
        help="GPUs you have in mind (default 1). The plan may change it to fit; with 0 the "
        "job runs on CPUs and is not planned (the planner fits GPU memory).",
    )
    @argument(
        "--dry-run", action="store_true", help="Show the translation, the plan and the final command; submit nothing."
    )
    @argument(
        "--as-is",
        action="store_true",
        help="Skip the planner: submit your configuration as written (older argument names "
        "are still translated, as ms-swift 4.x rejects them); if the quota refuses, show "
        "its answer.",
    )
    @argument(
        "--name",
        default=None,
        metavar="NAME",
        help="The start of the job's name (lower-case letters, digits and dashes): the job is "
        "NAME-xxxxx, 5 random characters added as Kubernetes' generateName does, so the same "
        "cell or notebook can run again; default: sft-xxxxx.",
    )
    @argument(
        "--priority",
        default=None,
        choices=list(priority.PRIORITIES),
        help="high, normal (the default) or best-effort: a high or normal job may preempt your "
        "team's own best-effort jobs; a best-effort job may also run on GPUs other teams leave "
        "idle, and is preempted (then requeued, and resumed from its last checkpoint) when they "
        "want them back.",
    )
    @argument("--best-effort", action="store_true", help="The same as --priority best-effort.")
    @argument(
        "swift_args",
        nargs="*",
        metavar="SWIFT_SFT_ARGS",
        help="The arguments of `swift sft`, in ms-swift 4.x names (--model, --tuner_type, "
        "--dataset, ...) or the older names of blog posts (--model_type qwen-vl-chat, "
        "--sft_type qlora, --dtype bnb_nf4, --batch_size, --use_flash_attn, ...). A leading "
        "`swift sft` is dropped. As a cell magic, each line of the cell adds arguments; "
        "`#` starts a comment and a trailing backslash is allowed.",
    )
    @line_cell_magic
    def swift_sft(self, line: str, cell: str | None = None):
        """Plan a ms-swift fine-tune against your team's quota, then submit and follow it.

        The arguments are translated to ms-swift 4.x names (each translation is printed), fitted
        to the namespace's balance by the server's planner (the plan shows what it changed and
        why), checked by the installed ms-swift's own parser, and submitted. The job is followed
        live (status, steps, loss plot, ETA, log tail, Cancel) and returned as a ``Job``:
        ``job.status``, ``job.logs()``, ``job.wait()``, ``job.cancel()``, ``job.losses``.

        Example::

            %swift_sft --dry-run swift sft --model_type qwen-vl-chat --sft_type qlora \\
                --dtype bnb_nf4 --dataset my_custom_data --batch_size 2 --use_flash_attn true
        """
        ours, swift_argv = split_arguments(line, cell)
        opts = self.swift_sft.parser.parse_args(ours)
        with _friendly_errors():
            return self._swift_sft(opts, swift_argv)

    def _swift_sft(self, opts, swift_argv: list[str]):
        if not swift_argv:
            raise UsageError(
                "no swift sft arguments: give at least --model and --dataset (see %swift_sft? for the options)"
            )
        if opts.gpus is not None and opts.gpus < 0:
            raise UsageError(f"--gpus {opts.gpus}: give 0 (CPU only), 1, 2, ...")
        parsed = parse_sft_args(swift_argv)
        if not parsed.model:
            raise UsageError("--model is required: a catalog name, a hub id or a local folder with a config.json")
        print(translation_text(parsed))
        client = self.client()
        namespace = self.choose_namespace(client, opts.namespace)
        args, gpus, resources = parsed.to_argv(), opts.gpus, None

        if opts.as_is or gpus == 0:
            gpus = 1 if gpus is None else gpus
            why = (
                "--as-is: not planned"
                if opts.as_is
                else "--gpus 0: a CPU job, not planned (the planner fits GPU memory)"
            )
            print(
                f"{why}; {'would submit' if opts.dry_run else 'submitting'} on {gpus} GPU(s) in {namespace}:\n"
                f"  {command_line(args, gpus)}"
            )
        else:
            result = client.plan(namespace, args, gpus)
            show_plan(result)
            best = result.get("recommended")
            if best is None:
                if opts.dry_run:
                    return None
                raise UsageError(
                    f"nothing fits {namespace} now (see the rejected plans above); "
                    "--as-is submits your configuration anyway and shows the quota's answer"
                )
            args, gpus, resources = best["args"], best["gpus"], best.get("resources")

        self._check_with_ms_swift(args)
        if opts.dry_run:
            print("Dry run: nothing submitted. Run the same line without --dry-run to submit.")
            return None

        body: dict = {"args": list(args), "gpus": gpus, **_priority_and_name(opts)}
        if resources:
            body["resources"] = resources
        info = client.submit(namespace, body)
        job = Job(client, namespace, info["name"], info, interval=self.poll_interval)
        self.last_job = job
        print(
            f"Submitted {namespace}/{job.name}: {job.phase}. It is followed below; the Job is "
            "returned (job.status, job.logs(), job.wait(), job.cancel())."
        )
        if in_kernel():
            from IPython.display import display

            display(job)  # the widget, with the text for a frontend that shows none
            job.follow()
        return job

    # -- %swift_deploy ---------------------------------------------------------------------------
    @magic_arguments()
    @argument("--namespace", default=None, metavar="NS", help="The team namespace to serve in; default: your only one.")
    @argument(
        "--gpus", type=int, default=None, metavar="N", help="GPUs the server takes (default 0: transformers on CPU)."
    )
    @argument(
        "--name",
        default=None,
        metavar="NAME",
        help="The start of the endpoint's name: it is NAME-xxxxx (as %%swift_sft's jobs); default: serve-xxxxx.",
    )
    @argument(
        "--priority",
        default=None,
        choices=list(priority.PRIORITIES),
        help="high, normal (the default) or best-effort, as for a job.",
    )
    @argument("--best-effort", action="store_true", help="The same as --priority best-effort.")
    @argument(
        "--job",
        default=None,
        metavar="JOB",
        help="Serve the finished fine-tune JOB (a Succeeded %%swift_sft job of the namespace): the "
        "server adds its base model and its last checkpoint (--adapters, or --model after a full "
        "fine-tune); give no --model or --adapters then.",
    )
    @argument("--dry-run", action="store_true", help="Show the translated arguments; start nothing.")
    @argument("--no-wait", action="store_true", help="Return at once instead of waiting until it is Ready.")
    @argument(
        "deploy_args",
        nargs="*",
        metavar="SWIFT_DEPLOY_ARGS",
        help="The arguments of `swift deploy` (--model, --adapters, --infer_backend, ...), in "
        "ms-swift 4.x names or older ones (--model_id_or_path, --ckpt_dir, --max_model_len, ...), "
        "which are translated. Not --port or --host: the server picks them and proxies the API.",
    )
    @line_cell_magic
    def swift_deploy(self, line: str, cell: str | None = None):
        """Serve a model with ms-swift under your team's quota; returns an ``Endpoint``.

        The arguments are translated to ms-swift 4.x names (each translation is printed) and
        the endpoint is created (``POST .../endpoints``); the magic waits until it is Ready and
        returns it: ``ep.url`` (its OpenAI-compatible API through this Jupyter server),
        ``ep.models``, ``ep.openai()`` (an ``openai`` client signed in with your token),
        ``ep.stop()``. It stops by itself after ``endpoint_idle_minutes`` without a request.

        Example::

            ep = %swift_deploy --model ./tiny-qwen2 --infer_backend transformers
            ep.openai().chat.completions.create(model=ep.models[0], messages=[...])
            ep = %swift_deploy --job {job.name} --infer_backend transformers
        """
        ours, deploy_argv = split_arguments(line, cell, DEPLOY_VALUE_OPTIONS, DEPLOY_FLAG_OPTIONS)
        opts = self.swift_deploy.parser.parse_args(ours)
        with _friendly_errors():
            return self._swift_deploy(opts, deploy_argv)

    def _swift_deploy(self, opts, deploy_argv: list[str]):
        from ..deploy import parse_deploy_args
        from .endpoint import Endpoint

        parsed = parse_deploy_args(deploy_argv)
        if opts.job and (parsed.model or parsed.adapters):
            raise UsageError(
                f"--job {opts.job} serves that fine-tune's own checkpoint: leave out --model and --adapters"
            )
        if not parsed.model and not opts.job:
            raise UsageError(
                "--model is required (a hub id, a local folder, or a fine-tune's checkpoint), or "
                "--job NAME to serve a finished fine-tune"
            )
        args = parsed.to_argv()
        if parsed.notes:
            print("Translated from older ms-swift names:\n" + "\n".join(f"  {n}" for n in parsed.notes))
        served = f" (after the model and checkpoint of job {opts.job})" if opts.job else ""
        print(f"As ms-swift 4.x arguments{served}:\n  {shlex.join(['swift', 'deploy', *args])}")
        if opts.dry_run:
            print("Dry run: nothing started. Run the same line without --dry-run to serve.")
            return None
        client = self.client()
        namespace = self.choose_namespace(client, opts.namespace)
        body: dict = {"args": args, **_priority_and_name(opts)}
        if opts.job:
            body["job"] = opts.job
        if opts.gpus is not None:
            body["gpus"] = opts.gpus
        info = client.create_endpoint(namespace, body)
        if opts.job:
            print(f"Serving job {opts.job}: {shlex.join(['swift', 'deploy', *info['args']])}")
        endpoint = Endpoint(client, namespace, info["name"], info, interval=self.poll_interval)
        print(f"Created endpoint {namespace}/{endpoint.name}.")
        if not opts.no_wait:
            try:
                endpoint.wait(
                    progress=lambda e: print(f"  {e['phase']}" + (f": {e['message']}" if e.get("message") else ""))
                )
            except KeyboardInterrupt:
                print("Stopped waiting; the endpoint goes on (ep.refresh(), ep.stop()).")
        print(endpoint)
        return endpoint

    # -- helpers ---------------------------------------------------------------------------------
    def client(self):
        if self._client is None:
            self._client = self._connect()
        return self._client

    def choose_namespace(self, client, requested: str | None) -> str:
        """The namespace named, the configured one, else the user's only one; else ask."""
        if requested or self.namespace:
            return requested or self.namespace
        names = [item["name"] for item in client.namespaces()]
        if len(names) == 1:
            return names[0]
        if not names:
            raise UsageError(_no_namespace(client))
        raise UsageError(
            "you belong to several namespaces; choose one with --namespace NS (or "
            f"%config QuotaMagics.namespace = 'NS'): {', '.join(names)}"
        )

    def _check_with_ms_swift(self, args: list[str]) -> None:
        if not self.check_argv or importlib.util.find_spec("swift") is None:
            return
        problem = check_with_ms_swift(args)
        version = _version("ms-swift")
        if problem:
            raise UsageError(f"ms-swift {version} rejects the final arguments: {problem}")
        print(f"ms-swift {version}'s own parser accepts the final arguments.")


def _priority_and_name(opts) -> dict:
    """The body's ``priority`` and ``generateName`` from the magic's options, where given. The
    name is a prefix, not the name: a finished job's name must not block running the cell again."""
    body = {}
    level = _priority(opts)
    if level:
        body["priority"] = level
    if opts.name:
        body["generateName"] = opts.name if opts.name.endswith("-") else f"{opts.name}-"
    return body


def _priority(opts) -> str | None:
    """``--priority``, or ``--best-effort``; both must agree."""
    if opts.best_effort and opts.priority not in (None, priority.BEST_EFFORT):
        raise UsageError(f"--best-effort and --priority {opts.priority} disagree; give one")
    return priority.BEST_EFFORT if opts.best_effort else opts.priority


def split_arguments(
    line: str, cell: str | None = None, values: dict = VALUE_OPTIONS, flags: dict = FLAG_OPTIONS
) -> tuple[list[str], list[str]]:
    """(the magic's own option tokens, the ``swift sft`` tokens) from a line and an optional cell.

    The magic's options (``--namespace``, ``--gpus``, ``--name``, ``--priority``, ``--dry-run``,
    ``--as-is``, ``--best-effort``;
    ``_`` or ``-`` alike) may stand anywhere; everything after a bare ``--`` goes to ms-swift.
    """
    tokens = _shell_split(line)
    if cell:
        tokens += _shell_split(cell)
    ours: list[str] = []
    theirs: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            theirs.extend(tokens[i + 1 :])
            break
        key, eq, value = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        norm = key.replace("_", "-")
        if norm in values:
            if eq:
                ours += [values[norm], value]
            elif i + 1 < len(tokens):
                ours += [values[norm], tokens[i + 1]]
                i += 1
            else:
                raise UsageError(f"{token} needs a value")
        elif norm in flags:
            if eq:
                raise UsageError(f"{token}: {flags[norm]} is a flag and takes no value")
            ours.append(flags[norm])
        else:
            theirs.append(token)
        i += 1
    return ours, theirs


def translation_text(parsed) -> str:
    """What was translated from older ms-swift names, and the argv as ms-swift 4.x reads it."""
    lines = []
    if parsed.notes:
        lines.append("Translated from older ms-swift names:")
        lines += [f"  {note}" for note in parsed.notes]
    if parsed.unknown:
        lines.append(f"Not known to ms-swift 4.x (passed on as written): {', '.join('--' + u for u in parsed.unknown)}")
    lines.append("As ms-swift 4.x arguments:")
    lines.append(f"  {shlex.join(['swift', 'sft', *parsed.to_argv()])}")
    return "\n".join(lines)


def _shell_split(text: str) -> list[str]:
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise UsageError(f"cannot split the arguments as a shell would: {e}") from None


def _no_namespace(client) -> str:
    try:
        who = client.identity().get("name", "you")
    except Exception:  # noqa: BLE001 - only for the message
        who = "you"
    return (
        f"{who} belong(s) to no team namespace on this server; ask an admin to add you to a "
        "team profile (JupyterQuota.profiles)"
    )


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(unknown version)"


class _friendly_errors:
    """API, connection and argument errors become one ``UsageError`` line (no traceback)."""

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if value is None or isinstance(value, UsageError):
            return False
        if isinstance(value, (QuotaClientError, QuotaError)):
            raise UsageError(getattr(value, "message", None) or str(value)) from None
        return False
