"""Streamlit glue: session state, cached wrappers around mdp_core, figure builders and shared widgets."""
