"""The language identifier of chat-format style runs: lingua's detector modes compared.

    python bench/bench_language.py

Modes: all 75 languages in low accuracy mode (what distillscope.tasks.language builds), all
languages in high accuracy mode, and English + Spanish alone in high accuracy mode. Each is
measured in a fresh process (peak memory is per process): CPU seconds to build the detector and
identify a first sentence; CPU ms per sentence over 18 short reasoning sentences (9 English, 9
Spanish, one of three words in each; their first identification loads the models it needs);
CPU ms per 1,605-character Spanish paragraph (warm, 20 repeats); peak resident memory; and the
sentences identified as another language. CPU time, not wall time: the machine may be shared.
Needs the extra lang. Prints a Markdown table.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

ENGLISH = [
    "First I add three and five to get eight, then I multiply eight by seven.",
    "Let me try a different combination of the numbers before giving up.",
    "That does not reach the target, so I will subtract two from the larger number.",
    "The product is too large; dividing by four gives an exact integer.",
    "I need to use each number exactly once and only integer divisions.",
    "So the answer is fifty six, which matches the target.",
    "Maybe starting with the biggest number works better here.",
    "Wait, that uses the five twice.",
    "Okay, this works.",
]
SPANISH = [
    "Primero sumo tres y cinco para obtener ocho, luego multiplico ocho por siete.",
    "Voy a probar otra combinación de los números antes de rendirme.",
    "Eso no llega al objetivo, así que resto dos del número más grande.",
    "El producto es demasiado grande; al dividir entre cuatro obtengo un entero exacto.",
    "Tengo que usar cada número exactamente una vez y solo divisiones enteras.",
    "Entonces la respuesta es cincuenta y seis, que coincide con el objetivo.",
    "Quizás empezar con el número más grande funciona mejor aquí.",
    "Espera, eso usa el cinco dos veces.",
    "Vale, esto funciona.",
]
MODES = {
    "all languages, low accuracy (ours)": "all_low",
    "all languages, high accuracy": "all_high",
    "English + Spanish, high accuracy": "en_es",
}


def build(mode: str):
    from lingua import Language, LanguageDetectorBuilder

    if mode == "en_es":
        return LanguageDetectorBuilder.from_languages(Language.ENGLISH, Language.SPANISH).build()
    builder = LanguageDetectorBuilder.from_all_languages()
    return (builder.with_low_accuracy_mode() if mode == "all_low" else builder).build()


def measure(mode: str) -> dict:
    """One mode's numbers, in this process."""
    from lingua import Language

    t0 = time.process_time()
    detector = build(mode)
    detector.detect_language_of("Let me think about it.")
    t1 = time.process_time()
    wrong = [
        text
        for texts, want in ((ENGLISH, Language.ENGLISH), (SPANISH, Language.SPANISH))
        for text in texts
        if detector.detect_language_of(text) != want
    ]
    t2 = time.process_time()
    paragraph = " ".join(SPANISH[:-1]) * 3
    for _ in range(20):
        detector.detect_language_of(paragraph)
    t3 = time.process_time()
    return {
        "load_s": t1 - t0,
        "sentence_ms": (t2 - t1) / (len(ENGLISH) + len(SPANISH)) * 1e3,
        "paragraph_chars": len(paragraph),
        "paragraph_ms": (t3 - t2) / 20 * 1e3,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "wrong": wrong,
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--mode":
        print(json.dumps(measure(sys.argv[2])))
        return
    try:
        import lingua  # noqa: F401
    except ImportError:
        sys.exit("bench_language needs the extra lang: pip install 'distillscope[lang]'")
    rows = []
    for name, mode in MODES.items():
        out = subprocess.run(
            [sys.executable, __file__, "--mode", mode], capture_output=True, text=True, check=True
        )
        rows.append((name, json.loads(out.stdout.strip().splitlines()[-1])))
    chars = rows[0][1]["paragraph_chars"]
    print(
        f"| detector | build + first (CPU s) | per sentence, cold (CPU ms) | per {chars:,}-char "
        "paragraph (CPU ms) | peak memory | misidentified of 18 sentences |"
    )
    print("|---|---|---|---|---|---|")
    for name, m in rows:
        wrong = ", ".join(f'"{t}"' for t in m["wrong"]) or "none"
        print(
            f"| {name} | {m['load_s']:.2f} | {m['sentence_ms']:.1f} | {m['paragraph_ms']:.1f} | "
            f"{m['rss_mb']:.0f} MB | {wrong} |"
        )


if __name__ == "__main__":
    main()
