//! The expansion of `#[derive(ParamEnum)]`.

use crate::parameter::crate_path;
use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, LitStr};

/// A variant's `#[param(rename = "...")]`.
fn rename(variant: &syn::Variant) -> syn::Result<Option<LitStr>> {
    let mut name: Option<LitStr> = None;
    for attr in variant.attrs.iter().filter(|a| a.path().is_ident("param")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") {
                if name.is_some() {
                    return Err(meta.error("duplicate param key 'rename'"));
                }
                name = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(crate::unknown_key(
                    &meta,
                    " on a variant",
                    "it takes: rename",
                ))
            }
        })?;
    }
    Ok(name)
}

/// Expands `#[derive(ParamEnum)]`.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let krate = crate_path(input)?;
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "a ParamEnum cannot be generic",
        ));
    }
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new(
            ident.span(),
            "ParamEnum derives only for enums of unit variants",
        ));
    };
    if data.variants.is_empty() {
        return Err(syn::Error::new(
            ident.span(),
            "a ParamEnum needs at least one variant",
        ));
    }
    let mut names: Vec<String> = Vec::new();
    let mut variants = Vec::new();
    for v in &data.variants {
        if !matches!(v.fields, Fields::Unit) {
            return Err(syn::Error::new(
                v.fields.span(),
                format!(
                    "variant '{}' has fields; a ParamEnum's variants are unit variants",
                    v.ident
                ),
            ));
        }
        let renamed = rename(v)?;
        let name = match &renamed {
            Some(lit) => lit.value(),
            None => v.ident.to_string(),
        };
        if name.is_empty() {
            return Err(syn::Error::new(
                renamed.span(),
                "a variant's name cannot be empty",
            ));
        }
        if names.contains(&name) {
            return Err(syn::Error::new(
                renamed.as_ref().map_or(v.ident.span(), LitStr::span),
                format!("two variants have the name '{name}'"),
            ));
        }
        names.push(name);
        variants.push(&v.ident);
    }
    let name_arms = variants
        .iter()
        .zip(&names)
        .map(|(v, n)| quote!(#ident::#v => #n));
    let from_arms = variants
        .iter()
        .zip(&names)
        .map(|(v, n)| quote!(#n => ::core::option::Option::Some(#ident::#v)));
    Ok(quote! {
        impl #krate::param::ParamEnum for #ident {
            const NAMES: &'static [&'static str] = &[#(#names),*];

            fn from_name(name: &str) -> ::core::option::Option<Self> {
                match name {
                    #(#from_arms,)*
                    _ => ::core::option::Option::None,
                }
            }

            fn name(&self) -> &'static str {
                match self {
                    #(#name_arms,)*
                }
            }
        }

        impl #krate::param::ParamType for #ident {
            const ATTR_TYPE: &'static str = "string";
            const ENUMERATION: &'static [&'static str] =
                <Self as #krate::param::ParamEnum>::NAMES;

            fn from_attr(value: &#krate::proto::AttrValue) -> ::core::option::Option<Self> {
                #krate::param::__private::enum_from_attr::<Self>(value)
            }
        }
    })
}
