"""Messy files as people upload them, built in memory (no data file is stored in the repository).

Used by tests/data/test_real_files.py and the AppTest upload tests (loaded by path there).
"""

from __future__ import annotations

import numpy as np

__all__ = ["european", "penguins_like"]


def penguins_like(seed: int = 1) -> tuple[bytes, dict[str, np.ndarray]]:
    """344 rows shaped like palmerpenguins' ``penguins_raw.csv`` (the columns and the kinds of gaps)."""
    rng = np.random.default_rng(seed)
    n = 344
    species = rng.choice(
        ["Adelie Penguin (Pygoscelis adeliae)", "Gentoo penguin (Pygoscelis papua)", "Chinstrap penguin"], n
    )
    culmen = rng.normal(44.0, 5.0, n).round(1).astype(object)
    culmen[[3, 271]] = "NA"
    flipper = rng.integers(172, 231, n).astype(object)
    flipper[[3, 271]] = "NA"
    mass = rng.integers(2700, 6300, n).astype(object)
    mass[[3, 271]] = "NA"
    sex = rng.choice(["MALE", "FEMALE"], n).astype(object)
    sex[[3, 8, 9, 10, 11, 47, 178, 218, 256, 268]] = "NA"
    sex[336] = "."
    d15 = rng.normal(8.7, 0.5, n).round(5).astype(object)
    d15_missing = rng.choice(n, 14, replace=False)
    d15[d15_missing] = "NA"
    d13 = rng.normal(-25.7, 0.8, n).round(5).astype(object)
    d13[rng.choice(n, 13, replace=False)] = ""
    comments = np.array(["NA"] * n, dtype=object)
    notes = ["Not enough blood for isotopes.", "Sexing primers did not amplify.", "Adult not sampled."]
    notes.append("Nest never observed with full clutch.")
    comments[rng.choice(n, 26, replace=False)] = rng.choice(notes, 26)
    header = (
        "studyName,Sample Number,Species,Region,Island,Stage,Individual ID,Clutch Completion,Date Egg,"
        "Culmen Length (mm),Culmen Depth (mm),Flipper Length (mm),Body Mass (g),Sex,Delta 15 N (o/oo),"
        "Delta 13 C (o/oo),Comments"
    )
    lines = [header]
    for i in range(n):
        row = [
            rng.choice(["PAL0708", "PAL0809", "PAL0910"]),
            str(i % 152 + 1),
            species[i],
            "Anvers",
            rng.choice(["Torgersen", "Biscoe", "Dream"]),
            '"Adult, 1 Egg Stage"',
            f"N{(i % 190) // 2 + 1}A{i % 2 + 1}",
            rng.choice(["Yes", "No"]),
            f"{int(rng.integers(11, 13))}/{int(rng.integers(1, 29))}/0{int(rng.integers(7, 10))}",
            str(culmen[i]),
            f"{rng.normal(17.2, 2.0):.1f}",
            str(flipper[i]),
            str(mass[i]),
            sex[i],
            str(d15[i]),
            str(d13[i]),
            comments[i],
        ]
        lines.append(",".join(row))
    raw = ("\n".join(lines) + "\n").encode()
    numeric_missing = np.zeros(n, bool)
    for arr in (culmen, flipper, mass, d15):
        numeric_missing |= np.array([v == "NA" for v in arr])
    numeric_missing |= np.array([v == "" for v in d13])
    return raw, {"numeric_missing": numeric_missing, "sex_missing": np.array([v in ("NA", ".") for v in sex])}


def european(rows: int = 800, seed: int = 7) -> tuple[bytes, dict[str, np.ndarray]]:
    """A ``;``-separated latin-1 export with decimal commas, thousands dots, a quoted header, an ID column,
    dates, free text and blanks (like the file of issue 11)."""
    rng = np.random.default_rng(seed)
    words = ["Müller", "größer", "café", "ok", "später anrufen", "Straße 5", "früh", "élan", "rückfrage"]
    lines = ["ID;'Alter';Einkommen;Geschlecht;Datum;Notiz;Stufe;Größe;Zufrieden"]
    income = (rng.lognormal(10.3, 0.6, rows) * 100).round() / 100
    height = rng.normal(1.72, 0.09, rows).round(2)
    age = rng.integers(18, 90, rows).astype(float)
    age[rng.random(rows) < 0.05] = np.nan
    sex = rng.choice(["m", "w", "d"], rows, p=[0.48, 0.48, 0.04]).astype(object)
    sex[rng.random(rows) < 0.04] = ""
    for i in range(rows):
        whole, cents = divmod(round(income[i] * 100), 100)
        income_s = f"{whole:,}".replace(",", ".") + f",{cents:02d}"
        day, month, year = int(rng.integers(1, 29)), int(rng.integers(1, 13)), int(rng.integers(2015, 2025))
        date = f"{day:02d}.{month:02d}.{year}"
        note = " ".join(rng.choice(words, int(rng.integers(2, 5)))) + f" {i}"
        level = str(rng.choice(["niedrig", "mittel", "hoch"]))
        age_s = "" if np.isnan(age[i]) else str(int(age[i]))
        height_s = f"{height[i]:.2f}".replace(".", ",")
        happy = int(rng.integers(1, 6))
        lines.append(f"ID{i:05d};{age_s};{income_s};{sex[i]};{date};{note};{level};{height_s};{happy}")
    raw = ("\r\n".join(lines) + "\r\n").encode("latin-1")
    return raw, {"income": income, "height": height, "age": age, "sex_missing": sex == ""}
